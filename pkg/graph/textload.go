package graph

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strings"
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// LoadOptions controls what the loaders accept.
type LoadOptions struct {
	// AllowMissingFeatures loads a dataset that ships no node features (PubMed) with a zero
	// Features value, for partitioning and scale work; without it such a dataset is refused
	// with an error wrapping ErrNoFeatures that carries meta.json's missing note.
	AllowMissingFeatures bool
	// Split names the split of an OGB layout to read (split/NAME); empty: the only one.
	Split string
	// Format, when set, is the layout the dataset must be in (FormatText, FormatPrepared,
	// FormatOGB or FormatNumPy); Load refuses a path in another layout rather than read it as
	// that one. Empty: detected from the files.
	Format Format
}

// LoadText reads the plain-text dataset (datasets/FORMAT.md) in directory dir of fsys, refusing
// datasets without features.
func LoadText(fsys fs.FS, dir string) (*Dataset, error) {
	return LoadTextWith(fsys, dir, LoadOptions{})
}

// LoadTextWith reads the plain-text dataset in directory dir of fsys under opts.
func LoadTextWith(fsys fs.FS, dir string, opts LoadOptions) (*Dataset, error) {
	return loadText(fsys, dir, dir, opts)
}

const (
	metaFile     = "meta.json"
	labelsFile   = "labels.txt"
	featuresFile = "features.txt.gz"
	edgesPlain   = "edges.txt"
	edgesGzip    = "edges.txt.gz"
)

// maxClasses bounds num_classes (it sizes per-class arrays).
const maxClasses = 1 << 20

// textLoader reads the files of one dataset directory.
type textLoader struct {
	fsys    fs.FS
	dir     string // the directory inside fsys
	display string // how errors name the directory
	metaRaw []byte // meta.json, for locating fields in errors
}

// loadText loads directory dir of fsys; display is how error messages name that directory.
func loadText(fsys fs.FS, dir, display string, opts LoadOptions) (*Dataset, error) {
	l := &textLoader{fsys: fsys, dir: dir, display: display}
	m, has, err := l.readMeta()
	if err != nil {
		return nil, err
	}
	if !m.FeaturesAvailable && !opts.AllowMissingFeatures {
		err := (&Dataset{Name: m.Name, Meta: m}).RequireFeatures()
		return nil, fmt.Errorf("load %s: %w", display, err)
	}
	labels, err := l.readLabels(&m, has)
	if err != nil {
		return nil, err
	}
	n := m.NumNodes

	var adj, feat *tensor.CSR
	var edgeErr, featErr error
	var wg sync.WaitGroup
	if m.FeaturesAvailable {
		wg.Go(func() { feat, featErr = l.readFeatures(&m, n) })
	}
	adj, edgeErr = l.readEdges(&m, n)
	wg.Wait()
	if edgeErr != nil {
		return nil, edgeErr
	}
	if featErr != nil {
		return nil, featErr
	}
	iso := isolatedNodes(adj)
	if !has["isolated_nodes"] {
		m.IsolatedNodes = iso
	} else if iso != m.IsolatedNodes {
		return nil, l.metaErr("isolated_nodes", "isolated_nodes is %d, but %s leaves %d nodes without any edge", m.IsolatedNodes, m.EdgeFile, iso)
	}
	d := &Dataset{Name: m.Name, NumClasses: m.NumClasses, Adj: adj, Labels: labels}
	if feat != nil {
		d.Features.Sparse = feat
		nz := int64(len(feat.ColIdx))
		if !has["num_feature_nonzeros"] {
			m.NumFeatureNonzeros = &nz
		} else if m.NumFeatureNonzeros == nil || *m.NumFeatureNonzeros != nz {
			got := "null"
			if m.NumFeatureNonzeros != nil {
				got = fmt.Sprint(*m.NumFeatureNonzeros)
			}
			return nil, l.metaErr("num_feature_nonzeros", "num_feature_nonzeros is %s, but %s has %d nonzeros", got, featuresFile, nz)
		}
	}
	owner := make([]uint8, n)
	splits := [3]*[]int32{&d.Train, &d.Val, &d.Test}
	sizes := [3]int{m.SplitSizes.Train, m.SplitSizes.Val, m.SplitSizes.Test}
	for s := range splits {
		ids, err := l.readSplit(s, sizes[s], labels, owner)
		if err != nil {
			return nil, err
		}
		*splits[s] = ids
	}
	d.Meta = m
	return d, nil
}

func (l *textLoader) name(file string) string { return path.Join(l.display, file) }

// metaErr returns a *ParseError on meta.json at the line of field key.
func (l *textLoader) metaErr(key, format string, args ...any) error {
	return &ParseError{File: l.name(metaFile), Line: lineOfKey(l.metaRaw, key), Msg: fmt.Sprintf(format, args...)}
}

// lineOfKey returns the 1-based line of the first occurrence of "key" in raw JSON, 0 if absent.
func lineOfKey(raw []byte, key string) int {
	i := bytes.Index(raw, []byte(`"`+key+`"`))
	if i < 0 {
		return 0
	}
	return lineAt(raw, int64(i))
}

// lineAt returns the 1-based line holding byte offset off of raw.
func lineAt(raw []byte, off int64) int {
	off = min(max(off, 0), int64(len(raw)))
	return bytes.Count(raw[:off], []byte{'\n'}) + 1
}

var requiredMetaFields = []string{"name", "num_nodes", "num_edges", "num_features", "num_classes", "split_sizes"}

// readMeta parses and checks meta.json; has reports which top-level keys are present.
func (l *textLoader) readMeta() (Meta, map[string]bool, error) {
	file := l.name(metaFile)
	raw, err := fs.ReadFile(l.fsys, path.Join(l.dir, metaFile))
	if err != nil {
		return Meta{}, nil, &ParseError{File: file, Msg: "missing or unreadable file", Err: err}
	}
	l.metaRaw = raw
	jsonErr := func(err error) error {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		line := 0
		switch {
		case errors.As(err, &se):
			line = lineAt(raw, se.Offset)
		case errors.As(err, &te):
			line = lineAt(raw, te.Offset)
		}
		return &ParseError{File: file, Line: line, Msg: "bad JSON", Err: err}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return Meta{}, nil, jsonErr(err)
	}
	has := make(map[string]bool, len(fields))
	for k := range fields {
		has[k] = true
	}
	for _, k := range requiredMetaFields {
		if !has[k] {
			return Meta{}, nil, &ParseError{File: file, Line: 1, Msg: fmt.Sprintf("missing required field %q", k)}
		}
	}
	m := Meta{FeaturesAvailable: true}
	if err := json.Unmarshal(raw, &m); err != nil {
		return Meta{}, nil, jsonErr(err)
	}
	n := int64(m.NumNodes)
	switch {
	case m.Name == "":
		return m, nil, l.metaErr("name", "name is empty")
	case m.NumNodes < 0 || m.NumNodes > math.MaxInt32:
		return m, nil, l.metaErr("num_nodes", "num_nodes %d outside [0, %d]", m.NumNodes, math.MaxInt32)
	case m.NumEdges < 0 || m.NumEdges > n*(n-1) || m.NumEdges%2 != 0:
		return m, nil, l.metaErr("num_edges", "num_edges %d must be even and within [0, N(N-1) = %d]", m.NumEdges, max(n*(n-1), 0))
	case has["num_undirected_edges"] && m.NumUndirectedEdges*2 != m.NumEdges:
		return m, nil, l.metaErr("num_undirected_edges", "num_undirected_edges %d is not num_edges/2 = %d", m.NumUndirectedEdges, m.NumEdges/2)
	case m.NumFeatures < 0 || m.NumFeatures > math.MaxInt32:
		return m, nil, l.metaErr("num_features", "num_features %d outside [0, %d]", m.NumFeatures, math.MaxInt32)
	case m.NumClasses < 1 || m.NumClasses > maxClasses:
		return m, nil, l.metaErr("num_classes", "num_classes %d outside [1, %d]", m.NumClasses, maxClasses)
	case m.NumFeatureNonzeros != nil && (*m.NumFeatureNonzeros < 0 || *m.NumFeatureNonzeros > n*int64(m.NumFeatures)):
		return m, nil, l.metaErr("num_feature_nonzeros", "num_feature_nonzeros %d outside [0, num_nodes × num_features]", *m.NumFeatureNonzeros)
	case m.SplitSizes.Train < 0 || m.SplitSizes.Val < 0 || m.SplitSizes.Test < 0 ||
		int64(m.SplitSizes.Train)+int64(m.SplitSizes.Val)+int64(m.SplitSizes.Test) > n:
		return m, nil, l.metaErr("split_sizes", "split_sizes train %d, val %d, test %d are negative or add up to more than num_nodes %d",
			m.SplitSizes.Train, m.SplitSizes.Val, m.SplitSizes.Test, n)
	case has["class_counts"] && len(m.ClassCounts) != m.NumClasses:
		return m, nil, l.metaErr("class_counts", "class_counts has %d entries for num_classes %d", len(m.ClassCounts), m.NumClasses)
	}
	switch {
	case !has["edge_file"]:
		m.EdgeFile = edgesPlain
		if _, err := fs.Stat(l.fsys, path.Join(l.dir, edgesPlain)); err != nil {
			m.EdgeFile = edgesGzip
		}
	case m.EdgeFile != edgesPlain && m.EdgeFile != edgesGzip:
		return m, nil, l.metaErr("edge_file", "edge_file %q is neither %s nor %s", m.EdgeFile, edgesPlain, edgesGzip)
	}
	if !has["num_undirected_edges"] {
		m.NumUndirectedEdges = m.NumEdges / 2
	}
	for i, id := range m.UnlabeledNodes {
		if id < 0 || int64(id) >= n || (i > 0 && id <= m.UnlabeledNodes[i-1]) {
			return m, nil, l.metaErr("unlabeled_nodes", "unlabeled_nodes[%d] = %d is out of order or outside [0, %d)", i, id, n)
		}
	}
	return m, has, nil
}

// textFile is an open dataset file, decompressed when its name ends in .gz.
type textFile struct {
	*lineReader
	size  int64 // an upper estimate of the text's size (for bounding preallocation), -1 unknown
	close func() error
}

// Close closes the file; a read-only file has no error worth reporting.
func (t *textFile) Close() error { return t.close() }

// gzipRatioBound is the text-to-compressed size ratio assumed when bounding preallocation for a
// gzipped file; a larger real ratio only costs some slice growth.
const gzipRatioBound = 8

func (l *textLoader) open(file string) (*textFile, error) {
	name := l.name(file)
	f, err := l.fsys.Open(path.Join(l.dir, file))
	if err != nil {
		return nil, &ParseError{File: name, Msg: "missing or unreadable file", Err: err}
	}
	tf := &textFile{size: -1, close: f.Close}
	if st, err := f.Stat(); err == nil {
		tf.size = st.Size()
	}
	if !strings.HasSuffix(file, ".gz") {
		tf.lineReader = newLineReader(f, name)
		return tf, nil
	}
	if tf.size >= 0 {
		tf.size *= gzipRatioBound
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, readBufSize))
	if err != nil {
		f.Close()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, &ParseError{File: name, Line: 1, Msg: "not a gzip file, or its header is truncated or corrupt", Err: err}
	}
	tf.lineReader = newLineReader(zr, name)
	tf.gz = true
	return tf, nil
}

// capHint bounds a preallocation of claimed items by what a text of size bytes (-1: unknown)
// can hold at bytesPerItem bytes or more each.
func capHint(claimed, bytesPerItem, size int64) int {
	c := min(claimed, 1<<24)
	if size >= 0 {
		c = min(c, size/bytesPerItem+1)
	}
	return int(max(c, 0))
}

// readLabels reads labels.txt: exactly num_nodes lines, each a class in [-1, num_classes).
func (l *textLoader) readLabels(m *Meta, has map[string]bool) ([]int32, error) {
	f, err := l.open(labelsFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, c := m.NumNodes, int64(m.NumClasses)
	labels := make([]int32, 0, capHint(int64(n), 2, f.size))
	counts := make([]int64, m.NumClasses)
	for {
		line, err := f.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(labels) == n {
			return nil, f.errf(0, "more than num_nodes = %d lines", n)
		}
		v, ok := parseInt(line)
		if !ok {
			return nil, f.errf(1, "label %s is not an integer", quoteToken(line))
		}
		if v < -1 || v >= c {
			return nil, f.errf(1, "label %d outside [-1, %d)", v, c)
		}
		if v >= 0 {
			counts[v]++
		}
		labels = append(labels, int32(v))
	}
	if len(labels) != n {
		return nil, f.errAt(f.line+1, 0, "file ends after %d lines, meta.json num_nodes = %d", len(labels), n)
	}
	if has["class_counts"] {
		for k := range counts {
			if counts[k] != m.ClassCounts[k] {
				return nil, l.metaErr("class_counts", "class_counts[%d] is %d, but %s has %d nodes of class %d", k, m.ClassCounts[k], labelsFile, counts[k], k)
			}
		}
	} else {
		m.ClassCounts = counts
	}
	if has["unlabeled_nodes"] {
		listed := m.UnlabeledNodes
		for i, v := range labels {
			inList := len(listed) > 0 && int(listed[0]) == i
			if inList {
				listed = listed[1:]
			}
			switch {
			case inList && v >= 0:
				return nil, f.errAt(i+1, 1, "node %d has label %d, but meta.json lists it in unlabeled_nodes", i, v)
			case !inList && v < 0:
				return nil, f.errAt(i+1, 1, "node %d has label -1, but meta.json does not list it in unlabeled_nodes", i)
			}
		}
	}
	return labels, nil
}

// readEdges reads the edge file straight into CSR form, checking order, range and symmetry.
func (l *textLoader) readEdges(m *Meta, n int) (*tensor.CSR, error) {
	f, err := l.open(m.EdgeFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	nn := int64(n)
	rowPtr := make([]int64, n+1)
	colIdx := make([]int32, 0, capHint(m.NumEdges, 4, f.size))
	prevU, prevV := int64(-1), int64(-1)
	for {
		line, err := f.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		u, i, ok := parseUint(line, 0)
		if !ok {
			return nil, f.errf(1, "expected \"src dst\" (two node ids and one space), got %s", quoteToken(line))
		}
		if i >= len(line) || line[i] != ' ' {
			return nil, f.errf(i+1, "expected one space after src, got %s", quoteToken(line))
		}
		v, j, ok := parseUint(line, i+1)
		if !ok {
			return nil, f.errf(i+2, "expected a dst node id, got %s", quoteToken(line))
		}
		if j != len(line) {
			return nil, f.errf(j+1, "unexpected %s after dst", quoteToken(line[j:]))
		}
		switch {
		case u >= nn:
			return nil, f.errf(1, "src node id %d out of range [0, %d)", u, nn)
		case v >= nn:
			return nil, f.errf(i+2, "dst node id %d out of range [0, %d)", v, nn)
		case u == v:
			return nil, f.errf(1, "self loop %d %d", u, v)
		case u == prevU && v == prevV:
			return nil, f.errf(1, "duplicate edge %d %d", u, v)
		case u < prevU || (u == prevU && v < prevV):
			return nil, f.errf(1, "edge %d %d out of order after %d %d (lines are sorted by src, then dst)", u, v, prevU, prevV)
		}
		if int64(len(colIdx)) == m.NumEdges {
			return nil, f.errf(0, "more than num_edges = %d edges", m.NumEdges)
		}
		rowPtr[u+1]++
		colIdx = append(colIdx, int32(v))
		prevU, prevV = u, v
	}
	if int64(len(colIdx)) != m.NumEdges {
		return nil, f.errAt(f.line+1, 0, "file ends after %d edges, meta.json num_edges = %d", len(colIdx), m.NumEdges)
	}
	for i := range n {
		rowPtr[i+1] += rowPtr[i]
	}
	adj := &tensor.CSR{Rows: n, Cols: n, RowPtr: rowPtr, ColIdx: colIdx}
	if k := asymmetricEntry(adj); k >= 0 {
		u, v := entryAt(adj, k)
		return nil, f.errAt(int(k)+1, 0, "edge %d %d has no reverse %d %d (each undirected edge is listed in both directions)", u, v, v, u)
	}
	return adj, nil
}

// readFeatures reads features.txt.gz into a CSR matrix with float32 values.
func (l *textLoader) readFeatures(m *Meta, n int) (*tensor.CSR, error) {
	f, err := l.open(featuresFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	nf := int64(m.NumFeatures)
	hint := int64(1 << 20)
	if m.NumFeatureNonzeros != nil {
		hint = *m.NumFeatureNonzeros
	}
	hint = min(hint, int64(n)*nf)
	rowPtr := make([]int64, n+1)
	colIdx := make([]int32, 0, capHint(hint, 4, f.size)) // the shortest token is "0:1 "
	val := make([]float32, 0, cap(colIdx))
	row := 0
	for {
		line, err := f.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if row == n {
			return nil, f.errf(0, "more than num_nodes = %d lines", n)
		}
		prev := int64(-1)
		for i := 0; i < len(line); {
			end := len(line)
			if k := bytes.IndexByte(line[i:], ' '); k >= 0 {
				end = i + k
			}
			tok := line[i:end]
			c, j, ok := parseUint(line[:end], i)
			if !ok || j == end || line[j] != ':' {
				return nil, f.errf(i+1, "expected col:value, got %s", quoteToken(tok))
			}
			v, err := parseValue(line[j+1 : end])
			switch {
			case err != nil:
				return nil, f.errf(j+2, "token %s: %v", quoteToken(tok), err)
			case c >= nf:
				return nil, f.errf(i+1, "feature column %d out of range [0, num_features = %d)", c, nf)
			case c <= prev:
				return nil, f.errf(i+1, "feature column %d not greater than the previous %d", c, prev)
			case v == 0:
				return nil, f.errf(j+2, "token %s: explicit zero (zeros are never written)", quoteToken(tok))
			}
			prev = c
			colIdx = append(colIdx, int32(c))
			val = append(val, v)
			if end < len(line) && end+1 == len(line) {
				return nil, f.errf(end+1, "trailing space")
			}
			i = end + 1
			if end < len(line) && line[i] == ' ' {
				return nil, f.errf(i+1, "two spaces between tokens")
			}
		}
		row++
		rowPtr[row] = int64(len(colIdx))
	}
	if row != n {
		return nil, f.errAt(f.line+1, 0, "file ends after %d lines, meta.json num_nodes = %d", row, n)
	}
	return &tensor.CSR{Rows: n, Cols: m.NumFeatures, RowPtr: rowPtr, ColIdx: colIdx, Val: val}, nil
}

// readSplit reads split s (train, val, test): increasing node ids, labelled, in no other split.
func (l *textLoader) readSplit(s, size int, labels []int32, owner []uint8) ([]int32, error) {
	name := splitNames[s]
	f, err := l.open(name + ".txt")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ids, err := readNodeIDs(f, s, labels, owner, true, size, "label -1")
	if err != nil {
		return nil, err
	}
	if len(ids) != size {
		return nil, f.errAt(f.line+1, 0, "file ends after %d ids, meta.json split_sizes.%s = %d", len(ids), name, size)
	}
	return ids, nil
}

// readNodeIDs reads the node ids of split s from f, one a line: each in range, labelled (an
// unlabelled node is said to have the label unlabelled) and in no other split, owner recording
// which split holds each node. inOrder demands strictly increasing ids, and limit bounds them
// (meta.json's split_sizes).
func readNodeIDs(f *textFile, s int, labels []int32, owner []uint8, inOrder bool, limit int, unlabelled string) ([]int32, error) {
	n := int64(len(labels))
	ids := make([]int32, 0, capHint(int64(limit), 2, f.size))
	prev := int64(-1)
	err := f.each(func(line []byte) error {
		v, j, ok := parseUint(line, 0)
		switch {
		case !ok || j != len(line):
			return f.errf(1, "expected a node id, got %s", quoteToken(line))
		case v >= n:
			return f.errf(1, "node id %d out of range [0, %d)", v, n)
		case inOrder && v <= prev:
			return f.errf(1, "node id %d not greater than the previous %d", v, prev)
		case labels[v] < 0:
			return f.errf(1, "node %d is unlabelled (%s)", v, unlabelled)
		case owner[v] == uint8(s+1):
			return f.errf(1, "node %d listed twice", v)
		case owner[v] != 0:
			return f.errf(1, "node %d is also in the %s split", v, splitNames[owner[v]-1])
		case len(ids) == limit:
			return f.errf(0, "more than split_sizes.%s = %d ids", splitNames[s], limit)
		}
		owner[v] = uint8(s + 1)
		ids = append(ids, int32(v))
		prev = v
		return nil
	})
	return ids, err
}
