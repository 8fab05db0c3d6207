package graph

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"slices"
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// The files of OGB's node-property-prediction layout, as a dataset unpacks (ogbn-arxiv,
// ogbn-products, ...): one graph, gzipped CSV without a header row.
const (
	ogbNumNodes = "raw/num-node-list.csv.gz" // one line: N
	ogbNumEdges = "raw/num-edge-list.csv.gz" // one line: E, the lines of ogbEdges
	ogbEdges    = "raw/edge.csv.gz"          // E lines "src,dst"
	ogbFeatures = "raw/node-feat.csv.gz"     // N lines of F comma-separated values (optional)
	ogbLabels   = "raw/node-label.csv.gz"    // N lines: the class, or nan for an unlabelled node
	ogbSplitDir = "split"                    // split/NAME/{train,valid,test}.csv.gz: node ids
)

// ogbSplitFiles are the files of one OGB split, in the order train, val, test.
var ogbSplitFiles = [3]string{"train.csv.gz", "valid.csv.gz", "test.csv.gz"}

// IsOGBDir reports whether directory dir of fsys holds OGB's node-property layout (its
// raw/num-node-list.csv.gz).
func IsOGBDir(fsys fs.FS, dir string) bool {
	st, err := fs.Stat(fsys, path.Join(dir, ogbNumNodes))
	return err == nil && st.Mode().IsRegular()
}

// LoadOGB reads directory dir of fsys in OGB's node-property-prediction layout; display is how
// errors and the dataset's name call the directory. The edge list is made symmetric (each pair
// in both directions, repeats merged, self loops dropped; Meta.Conversion says what was done)
// and read twice, so that only the adjacency it becomes is held, never the list. Features are
// held sparse when fewer than half their values are nonzero. The split is split/SPLIT, or the
// only one under split/ when opts.Split is empty. Every malformed line is refused with a
// *ParseError naming the file, line and column.
func LoadOGB(fsys fs.FS, dir, display string, opts LoadOptions) (*Dataset, error) {
	l := &textLoader{fsys: fsys, dir: dir, display: display}
	n, err := l.readCount(ogbNumNodes, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	e, err := l.readCount(ogbNumEdges, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	split, err := l.ogbSplit(opts.Split)
	if err != nil {
		return nil, err
	}
	_, ferr := fs.Stat(fsys, path.Join(dir, ogbFeatures))
	hasFeat := ferr == nil
	if !hasFeat && !opts.AllowMissingFeatures {
		return nil, fmt.Errorf("graph: dataset %s: %w (load it only for graph work): %s is absent", display, ErrNoFeatures, l.name(ogbFeatures))
	}
	labels, classes, err := l.readOGBLabels(int(n))
	if err != nil {
		return nil, err
	}
	var feat Features
	var featErr error
	var wg sync.WaitGroup
	if hasFeat {
		wg.Go(func() { feat, featErr = l.readDenseCSV(int(n)) })
	}
	adj, st, err := symmetricAdjacency(int(n), l.ogbEdgePass(int(n), e))
	wg.Wait()
	if err == nil {
		err = featErr
	}
	if err != nil {
		return nil, err
	}
	d := &Dataset{Name: path.Base(display), NumClasses: classes, Adj: adj, Features: feat, Labels: labels}
	owner := make([]uint8, n)
	for s, dst := range [3]*[]int32{&d.Train, &d.Val, &d.Test} {
		if *dst, err = l.readOGBSplit(split, s, labels, owner); err != nil {
			return nil, err
		}
	}
	d.Meta = convertedMeta(d, "OGB node-property-prediction layout: "+display, "OGB split "+split, l.name(ogbEdges), st)
	if !hasFeat {
		d.Meta.Missing = "features: " + ogbFeatures + " is absent"
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("graph: load %s: %w", display, err)
	}
	return d, nil
}

// readCount reads a file of one line holding one count in [0, limit].
func (l *textLoader) readCount(file string, limit int64) (int64, error) {
	f, err := l.open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	line, err := f.next()
	if err == io.EOF {
		return 0, f.errAt(1, 0, "empty file, want one line holding a count")
	}
	if err != nil {
		return 0, err
	}
	v, j, ok := parseUint(line, 0)
	switch {
	case !ok || j != len(line):
		return 0, f.errf(1, "expected a count, got %s", quoteToken(line))
	case v > limit:
		return 0, f.errf(1, "count %d exceeds %d", v, limit)
	}
	if _, err := f.next(); err != io.EOF {
		if err != nil {
			return 0, err
		}
		return 0, f.errf(1, "a second line: the layout holds one graph (node-property prediction)")
	}
	return v, nil
}

// ogbSplit returns the split to read: want, or the only directory under split/.
func (l *textLoader) ogbSplit(want string) (string, error) {
	if want != "" {
		return want, nil
	}
	ents, err := fs.ReadDir(l.fsys, path.Join(l.dir, ogbSplitDir))
	if err != nil {
		return "", &ParseError{File: l.name(ogbSplitDir), Msg: "missing or unreadable split directory", Err: err}
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) != 1 {
		return "", &ParseError{File: l.name(ogbSplitDir), Msg: fmt.Sprintf("holds %d splits %v; name one (LoadOptions.Split)", len(names), names)}
	}
	return names[0], nil
}

// ogbEdgePass returns the edgePass over raw/edge.csv.gz: e lines "src,dst" with ids in [0, n).
func (l *textLoader) ogbEdgePass(n int, e int64) edgePass {
	return func(add func(u, v int32)) error {
		f, err := l.open(ogbEdges)
		if err != nil {
			return err
		}
		defer f.Close()
		nn, lines := int64(n), int64(0)
		err = f.each(func(line []byte) error {
			u, i, ok := parseUint(line, 0)
			if !ok {
				return f.errf(1, "expected \"src,dst\" (two node ids and a comma), got %s", quoteToken(line))
			}
			if i >= len(line) || line[i] != ',' {
				return f.errf(i+1, "expected a comma after src, got %s", quoteToken(line))
			}
			v, j, ok := parseUint(line, i+1)
			switch {
			case !ok:
				return f.errf(i+2, "expected a dst node id, got %s", quoteToken(line))
			case j != len(line):
				return f.errf(j+1, "unexpected %s after dst", quoteToken(line[j:]))
			case u >= nn:
				return f.errf(1, "src node id %d out of range [0, %s = %d)", u, ogbNumNodes, nn)
			case v >= nn:
				return f.errf(i+2, "dst node id %d out of range [0, %s = %d)", v, ogbNumNodes, nn)
			case lines == e:
				return f.errf(0, "more than %s = %d edges", ogbNumEdges, e)
			}
			lines++
			add(int32(u), int32(v))
			return nil
		})
		if err != nil {
			return err
		}
		if lines != e {
			return f.errAt(f.line+1, 0, "file ends after %d edges, %s = %d", lines, ogbNumEdges, e)
		}
		return nil
	}
}

// readOGBLabels reads raw/node-label.csv.gz: n lines, each a class ≥ 0 (written as an integer
// or an integral float such as 3.0) or nan for an unlabelled node. The classes are 0..max.
func (l *textLoader) readOGBLabels(n int) ([]int32, int, error) {
	f, err := l.open(ogbLabels)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	labels := make([]int32, 0, capHint(int64(n), 2, f.size))
	top := int32(-1)
	err = f.each(func(line []byte) error {
		if len(labels) == n {
			return f.errf(0, "more than %s = %d lines", ogbNumNodes, n)
		}
		c := int64(-1)
		if string(line) != "nan" && string(line) != "NaN" {
			v, j, ok := parseUint(line, 0)
			if ok && j < len(line) && line[j] == '.' {
				for j++; j < len(line) && line[j] == '0'; j++ {
				}
			}
			switch {
			case !ok || j != len(line):
				return f.errf(1, "label %s is not a class (a non-negative integer) or nan", quoteToken(line))
			case v >= maxClasses:
				return f.errf(1, "label %d exceeds the %d classes a dataset may have", v, maxClasses)
			}
			c = v
		}
		top = max(top, int32(c))
		labels = append(labels, int32(c))
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if len(labels) != n {
		return nil, 0, f.errAt(f.line+1, 0, "file ends after %d lines, %s = %d", len(labels), ogbNumNodes, n)
	}
	if top < 0 {
		return nil, 0, f.errAt(1, 0, "no node is labelled")
	}
	return labels, int(top) + 1, nil
}

// readDenseCSV reads raw/node-feat.csv.gz: n lines of the same number of comma-separated
// decimal values, into features (denseOrSparse).
func (l *textLoader) readDenseCSV(n int) (Features, error) {
	f, err := l.open(ogbFeatures)
	if err != nil {
		return Features{}, err
	}
	defer f.Close()
	var data []float32
	cols, row := -1, 0
	err = f.each(func(line []byte) error {
		if row == n {
			return f.errf(0, "more than %s = %d lines", ogbNumNodes, n)
		}
		if cols < 0 {
			cols = bytes.Count(line, []byte{','}) + 1
			// The shortest value with its comma is 2 bytes: bound what a short file can make
			// this allocate.
			c := int64(n) * int64(cols)
			if f.size >= 0 {
				c = min(c, f.size/2+1)
			}
			data = make([]float32, 0, c)
		}
		k := 0
		for i := 0; i <= len(line); k++ {
			end := len(line)
			if j := bytes.IndexByte(line[i:], ','); j >= 0 {
				end = i + j
			}
			if k == cols {
				return f.errf(i+1, "more than the %d values of line 1", cols)
			}
			v, err := parseValue(line[i:end])
			if err != nil {
				return f.errf(i+1, "value %d: %v", k+1, err)
			}
			data = append(data, v)
			i = end + 1
		}
		if k != cols {
			return f.errf(len(line)+1, "%d values, line 1 has %d", k, cols)
		}
		row++
		return nil
	})
	if err != nil {
		return Features{}, err
	}
	if row != n {
		return Features{}, f.errAt(f.line+1, 0, "file ends after %d lines, %s = %d", row, ogbNumNodes, n)
	}
	if cols < 0 {
		cols = 0
	}
	return denseOrSparse(&tensor.Dense{Rows: n, Cols: cols, Data: data}), nil
}

// readOGBSplit reads split/NAME/FILE of split s: node ids, one a line, in any order, each
// labelled and in no other split; it returns them sorted.
func (l *textLoader) readOGBSplit(name string, s int, labels []int32, owner []uint8) ([]int32, error) {
	f, err := l.open(path.Join(ogbSplitDir, name, ogbSplitFiles[s]))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ids, err := readNodeIDs(f, s, labels, owner, false, len(labels)+1, "nan in "+ogbLabels)
	slices.Sort(ids)
	return ids, err
}
