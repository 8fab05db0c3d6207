package graph

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadTextTiny(t *testing.T) {
	d := loadTiny(t)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.NumNodes() != 5 || d.Adj.NNZ() != 8 || d.NumFeatures() != 4 || d.NumClasses != 2 {
		t.Fatalf("got %d nodes, %d edges, %d features, %d classes", d.NumNodes(), d.Adj.NNZ(), d.NumFeatures(), d.NumClasses)
	}
	x := d.Features.Sparse
	wantPtr := []int64{0, 2, 2, 3, 4, 8}
	wantVal := []float32{1, 0.5, 3, -2.25, 1, 1, 1, 1}
	for i, v := range wantPtr {
		if x.RowPtr[i] != v {
			t.Fatalf("feature RowPtr %v, want %v", x.RowPtr, wantPtr)
		}
	}
	for i, v := range wantVal {
		if x.Val[i] != v {
			t.Fatalf("feature Val %v, want %v", x.Val, wantVal)
		}
	}
	if got := d.Labels[3]; got != -1 {
		t.Fatalf("label of node 3 = %d, want -1", got)
	}
	if len(d.Test) != 2 || d.Test[1] != 4 {
		t.Fatalf("test split %v", d.Test)
	}
}

// TestLoadTextFillsOptionalMeta checks that optional meta.json fields left out are derived.
func TestLoadTextFillsOptionalMeta(t *testing.T) {
	fsys := tinyFS(t)
	fsys["tiny/meta.json"] = &fstest.MapFile{Data: []byte(`{"name": "tiny", "num_nodes": 5, "num_edges": 8, "num_features": 4,
  "num_classes": 2, "split_sizes": {"train": 1, "val": 1, "test": 2}}`)}
	d, err := LoadText(fsys, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	m := d.Meta
	if m.EdgeFile != "edges.txt" || m.NumUndirectedEdges != 4 || m.NumFeatureNonzeros == nil || *m.NumFeatureNonzeros != 8 ||
		len(m.ClassCounts) != 2 || !m.FeaturesAvailable {
		t.Fatalf("derived meta %+v", m)
	}
}

func TestLoadTextGzipEdges(t *testing.T) {
	fsys := tinyFS(t)
	delete(fsys, "tiny/edges.txt")
	fsys["tiny/edges.txt.gz"] = &fstest.MapFile{Data: gz(t, tinyEdges)}
	fsys["tiny/meta.json"] = &fstest.MapFile{Data: []byte(strings.Replace(tinyMeta, `"edges.txt"`, `"edges.txt.gz"`, 1))}
	d, err := LoadText(fsys, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDatasets(d, withEdgeFile(loadTiny(t), "edges.txt.gz")); diff != "" {
		t.Fatalf("gzipped edges differ in %s", diff)
	}
}

func withEdgeFile(d *Dataset, name string) *Dataset {
	d.Meta.EdgeFile = name
	return d
}

// TestLoadTextMalformed feeds one broken file at a time and checks that the error is a
// *ParseError naming that file and line.
func TestLoadTextMalformed(t *testing.T) {
	truncGz := func(s string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			b := gz(t, s)
			return b[:len(b)*2/3]
		}
	}
	// corruptGz stores s uncompressed, so that the data is the text itself, and alters its first
	// byte equal to from into to: the stream decompresses, to garbled text, up to the checksum.
	corruptGz := func(s string, from, to byte) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			var b bytes.Buffer
			w, _ := gzip.NewWriterLevel(&b, gzip.NoCompression)
			if _, err := w.Write([]byte(s)); err != nil || w.Close() != nil {
				t.Fatal(err)
			}
			data := b.Bytes()
			i := bytes.Index(data, []byte(s)) + strings.IndexByte(s, from)
			data[i] = to
			return data
		}
	}
	meta := func(old, new string) string {
		if !strings.Contains(tinyMeta, old) {
			panic("tinyMeta has no " + old)
		}
		return strings.Replace(tinyMeta, old, new, 1)
	}
	cases := []struct {
		name     string
		file     string // file to replace
		content  string
		gen      func(t *testing.T) []byte // binary content instead of content
		metaJSON string                    // replacement meta.json, if any
		errFile  string                    // file the error must name (default: file)
		line     int                       // line the error must name (-1: none)
		want     string                    // substring of the message
	}{
		// edges
		{name: "edge not a number", file: "edges.txt", content: "0 1\n0 x\n", line: 2, want: "dst node id"},
		{name: "edge two spaces", file: "edges.txt", content: "0 1\n0  2\n", line: 2, want: "dst node id"},
		{name: "edge trailing space", file: "edges.txt", content: "0 1 \n", line: 1, want: "after dst"},
		{name: "edge one field", file: "edges.txt", content: "0 1\n0\n", line: 2, want: "one space"},
		{name: "edge tab", file: "edges.txt", content: "0\t1\n", line: 1, want: "one space"},
		{name: "edge empty line", file: "edges.txt", content: "0 1\n\n", line: 2, want: "src dst"},
		{name: "edge negative", file: "edges.txt", content: "-1 2\n", line: 1, want: "src dst"},
		{name: "edge src out of range", file: "edges.txt", content: "0 1\n5 0\n", line: 2, want: "src node id 5 out of range"},
		{name: "edge dst out of range", file: "edges.txt", content: "0 1\n0 7\n", line: 2, want: "dst node id 7 out of range"},
		{name: "edge huge id", file: "edges.txt", content: "0 99999999999999999999999\n", line: 1, want: "dst node id"},
		{name: "self loop", file: "edges.txt", content: "0 1\n0 2\n1 0\n1 1\n", line: 4, want: "self loop"},
		{name: "duplicate edge", file: "edges.txt", content: "0 1\n0 1\n", line: 2, want: "duplicate edge 0 1"},
		{name: "edges unsorted by src", file: "edges.txt", content: "1 0\n0 1\n", line: 2, want: "out of order"},
		{name: "edges unsorted by dst", file: "edges.txt", content: "0 2\n0 1\n", line: 2, want: "out of order"},
		{name: "edge without reverse", file: "edges.txt", content: "0 1\n0 2\n1 0\n1 2\n2 0\n2 1\n3 4\n4 2\n", line: 8, want: "no reverse 2 4"},
		{name: "too few edges", file: "edges.txt", content: "0 1\n0 2\n1 0\n1 2\n2 0\n2 1\n", line: 7, want: "file ends after 6 edges, meta.json num_edges = 8"},
		{name: "too many edges", file: "edges.txt", content: tinyEdges,
			metaJSON: meta(`"num_edges": 8,
  "num_undirected_edges": 4,`, `"num_edges": 6,`), line: 7, want: "more than num_edges = 6"},
		{name: "edges CRLF", file: "edges.txt", content: "0 1\r\n", line: 1, want: "carriage return"},
		{name: "edges missing", file: "edges.txt", line: -1, want: "missing"},
		{name: "edges truncated gzip", file: "edges.txt.gz", gen: truncGz(strings.Repeat(tinyEdges, 1)),
			metaJSON: meta(`"edges.txt"`, `"edges.txt.gz"`), line: 0, want: "truncated"},
		{name: "edges not gzip", file: "edges.txt.gz", content: tinyEdges,
			metaJSON: meta(`"edges.txt"`, `"edges.txt.gz"`), line: 1, want: "not a gzip file"},

		// features
		{name: "feature bad value", file: "features.txt.gz", content: "0:1 2:x\n\n1:3\n3:-2.25\n0:1 1:1 2:1 3:1\n", line: 1, want: "not a decimal number"},
		{name: "feature nan", file: "features.txt.gz", content: "0:1\n\n1:nan\n3:-2.25\n0:1 1:1 2:1 3:1\n", line: 3, want: "not a decimal number"},
		{name: "feature inf", file: "features.txt.gz", content: "0:1\n\n1:Inf\n3:-2.25\n0:1 1:1 2:1 3:1\n", line: 3, want: "not a decimal number"},
		{name: "feature overflow", file: "features.txt.gz", content: "0:1\n\n1:1e50\n3:-2.25\n0:1 1:1 2:1 3:1\n", line: 3, want: "overflows float32"},
		{name: "feature column out of range", file: "features.txt.gz", content: "0:1 4:1\n\n1:3\n3:-2.25\n0:1\n", line: 1, want: "column 4 out of range"},
		{name: "feature columns not increasing", file: "features.txt.gz", content: "0:1\n\n2:3 1:3\n3:-2.25\n0:1\n", line: 3, want: "not greater than the previous 2"},
		{name: "feature column repeated", file: "features.txt.gz", content: "0:1 0:2\n\n1:3\n3:-2.25\n0:1\n", line: 1, want: "not greater"},
		{name: "feature explicit zero", file: "features.txt.gz", content: "0:1\n\n1:0\n3:-2.25\n0:1\n", line: 3, want: "explicit zero"},
		{name: "feature no colon", file: "features.txt.gz", content: "0:1\n\n13\n3:-2.25\n0:1\n", line: 3, want: "expected col:value"},
		{name: "feature empty value", file: "features.txt.gz", content: "0:1\n\n1:\n3:-2.25\n0:1\n", line: 3, want: "empty value"},
		{name: "feature double space", file: "features.txt.gz", content: "0:1  2:1\n\n1:3\n3:-2.25\n0:1\n", line: 1, want: "two spaces"},
		{name: "feature trailing space", file: "features.txt.gz", content: "0:1 \n\n1:3\n3:-2.25\n0:1\n", line: 1, want: "trailing space"},
		{name: "too few feature lines", file: "features.txt.gz", content: "0:1\n\n1:3\n", line: 4, want: "file ends after 3 lines"},
		{name: "too many feature lines", file: "features.txt.gz", content: "0:1\n\n1:3\n3:-2.25\n0:1\n1:1\n", line: 6, want: "more than num_nodes"},
		{name: "features truncated gzip", file: "features.txt.gz", gen: truncGz(tinyFeatures), line: 0, want: "truncated"},
		{name: "features corrupt gzip", file: "features.txt.gz", gen: corruptGz(tinyFeatures, ':', ';'), line: 1,
			want: "corrupt gzip data (it decompressed to a line that does not parse: expected col:value, got \"0;1\"): gzip: invalid checksum"},
		{name: "edges corrupt gzip", file: "edges.txt.gz", gen: corruptGz(tinyEdges, '\n', ' '), metaJSON: meta(`"edges.txt"`, `"edges.txt.gz"`),
			line: 1, want: "corrupt gzip data (it decompressed to a line that does not parse"},
		{name: "features missing", file: "features.txt.gz", line: -1, want: "missing"},
		{name: "feature nonzeros mismatch", file: "features.txt.gz", content: "0:1\n\n1:3\n3:-2.25\n0:1 1:1 2:1 3:1\n",
			errFile: "meta.json", line: 8, want: "num_feature_nonzeros is 8, but features.txt.gz has 7"},

		// labels
		{name: "label too large", file: "labels.txt", content: "0\n1\n2\n-1\n1\n", line: 3, want: "label 2 outside [-1, 2)"},
		{name: "label below -1", file: "labels.txt", content: "0\n1\n-2\n-1\n1\n", line: 3, want: "label -2 outside"},
		{name: "label not a number", file: "labels.txt", content: "0\n1\nA\n-1\n1\n", line: 3, want: "not an integer"},
		{name: "label empty line", file: "labels.txt", content: "0\n\n0\n-1\n1\n", line: 2, want: "not an integer"},
		{name: "too few labels", file: "labels.txt", content: "0\n1\n0\n", line: 4, want: "file ends after 3 lines, meta.json num_nodes = 5"},
		{name: "too many labels", file: "labels.txt", content: "0\n1\n0\n-1\n1\n0\n", line: 6, want: "more than num_nodes = 5"},
		{name: "class counts mismatch", file: "labels.txt", content: "0\n1\n1\n-1\n1\n", errFile: "meta.json", line: 12, want: "class_counts[0] is 2"},
		{name: "labels missing", file: "labels.txt", line: -1, want: "missing"},

		// splits
		{name: "split not increasing", file: "test.txt", content: "4\n2\n", line: 2, want: "not greater than the previous 4"},
		{name: "split repeated id", file: "test.txt", content: "2\n2\n", line: 2, want: "not greater"},
		{name: "split id out of range", file: "test.txt", content: "2\n5\n", line: 2, want: "out of range [0, 5)"},
		{name: "split not a number", file: "val.txt", content: "one\n", line: 1, want: "expected a node id"},
		{name: "split unlabelled node", file: "test.txt", content: "2\n3\n", line: 2, want: "node 3 is unlabelled"},
		{name: "split overlap", file: "test.txt", content: "0\n2\n", line: 1, want: "node 0 is also in the train split"},
		{name: "split too short", file: "test.txt", content: "2\n", line: 2, want: "file ends after 1 ids, meta.json split_sizes.test = 2"},
		{name: "split too long", file: "val.txt", content: "1\n2\n", line: 2, want: "more than split_sizes.val = 1"},
		{name: "split missing", file: "train.txt", line: -1, want: "missing"},

		// meta.json
		{name: "meta bad json", file: "meta.json", content: "{\n  \"name\": \"tiny\",\n  \"num_nodes\": 5,,\n}", line: 3, want: "bad JSON"},
		{name: "meta wrong type", file: "meta.json", content: strings.Replace(tinyMeta, `"num_nodes": 5`, `"num_nodes": "five"`, 1), line: 3, want: "bad JSON"},
		{name: "meta missing field", file: "meta.json", content: strings.Replace(tinyMeta, `"num_classes": 2,`, ``, 1), line: 1, want: `missing required field "num_classes"`},
		{name: "meta negative nodes", file: "meta.json", content: strings.Replace(tinyMeta, `"num_nodes": 5`, `"num_nodes": -5`, 1), line: 3, want: "num_nodes -5 outside"},
		{name: "meta odd edges", file: "meta.json", content: strings.Replace(tinyMeta, `"num_edges": 8`, `"num_edges": 7`, 1), line: 4, want: "must be even"},
		{name: "meta impossible edges", file: "meta.json", content: strings.Replace(tinyMeta, `"num_edges": 8`, `"num_edges": 22`, 1), line: 4, want: "N(N-1) = 20"},
		{name: "meta undirected mismatch", file: "meta.json", content: strings.Replace(tinyMeta, `"num_undirected_edges": 4`, `"num_undirected_edges": 3`, 1), line: 5, want: "not num_edges/2"},
		{name: "meta zero classes", file: "meta.json", content: strings.Replace(tinyMeta, `"num_classes": 2`, `"num_classes": 0`, 1), line: 7, want: "num_classes 0 outside"},
		{name: "meta bad edge file", file: "meta.json", content: strings.Replace(tinyMeta, `"edges.txt"`, `"../edges.txt"`, 1), line: 10, want: "edge_file"},
		{name: "meta split sizes too large", file: "meta.json", content: strings.Replace(tinyMeta, `"test": 2`, `"test": 9`, 1), line: 13, want: "split_sizes"},
		{name: "meta isolated mismatch", file: "meta.json", content: strings.Replace(tinyMeta, `"isolated_nodes": 0`, `"isolated_nodes": 1`, 1), line: 11, want: "isolated_nodes is 1, but edges.txt leaves 0"},
		{name: "meta class counts length", file: "meta.json", content: strings.Replace(tinyMeta, `[2, 2]`, `[2, 2, 0]`, 1), line: 12, want: "class_counts has 3 entries"},
		{name: "meta missing", file: "meta.json", line: -1, want: "missing"},
		{name: "meta unlabeled list wrong", file: "meta.json", content: strings.Replace(tinyMeta, `"isolated_nodes": 0,`, `"isolated_nodes": 0, "unlabeled_nodes": [2],`, 1),
			errFile: "labels.txt", line: 3, want: "lists it in unlabeled_nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := tinyFS(t)
			if tc.metaJSON != "" {
				fsys["tiny/meta.json"] = &fstest.MapFile{Data: []byte(tc.metaJSON)}
			}
			if strings.HasSuffix(tc.file, ".gz") && tc.file != "features.txt.gz" {
				delete(fsys, "tiny/"+strings.TrimSuffix(tc.file, ".gz"))
			}
			switch {
			case tc.gen != nil:
				fsys["tiny/"+tc.file] = &fstest.MapFile{Data: tc.gen(t)}
			case tc.content != "" && strings.HasSuffix(tc.file, ".gz") && tc.name != "edges not gzip":
				fsys["tiny/"+tc.file] = &fstest.MapFile{Data: gz(t, tc.content)}
			case tc.content != "":
				fsys["tiny/"+tc.file] = &fstest.MapFile{Data: []byte(tc.content)}
			default:
				delete(fsys, "tiny/"+tc.file)
			}
			d, err := LoadText(fsys, "tiny")
			if err == nil {
				t.Fatalf("loaded %d nodes, want an error", d.NumNodes())
			}
			t.Log(err)
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			wantFile := "tiny/" + tc.file
			if tc.errFile != "" {
				wantFile = "tiny/" + tc.errFile
			}
			if pe.File != wantFile {
				t.Errorf("error names file %q, want %q: %v", pe.File, wantFile, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, wantFile) {
				t.Errorf("message %q does not name %s", msg, wantFile)
			}
			switch {
			case tc.line > 0 && pe.Line != tc.line:
				t.Errorf("error names line %d, want %d: %v", pe.Line, tc.line, err)
			case tc.line > 0 && !strings.Contains(msg, " line "):
				t.Errorf("message %q does not name the line", msg)
			case tc.line == 0 && pe.Line == 0:
				t.Errorf("error names no line: %v", err)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q does not contain %q", msg, tc.want)
			}
			if tc.line == -1 && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("missing-file error %v does not wrap fs.ErrNotExist", err)
			}
		})
	}
}

func TestLoadTextNoFeatures(t *testing.T) {
	fsys := tinyFS(t)
	delete(fsys, "tiny/features.txt.gz")
	m := strings.Replace(tinyMeta, `"features_available": true`, `"features_available": false, "incomplete": true, "missing": "features.txt.gz: lost in a flood"`, 1)
	m = strings.Replace(m, `"num_feature_nonzeros": 8`, `"num_feature_nonzeros": null`, 1)
	fsys["tiny/meta.json"] = &fstest.MapFile{Data: []byte(m)}
	_, err := LoadText(fsys, "tiny")
	if !errors.Is(err, ErrNoFeatures) || !strings.Contains(err.Error(), "lost in a flood") {
		t.Fatalf("LoadText: %v, want ErrNoFeatures with the missing note", err)
	}
	d, err := LoadTextWith(fsys, "tiny", LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Features.Present() || d.NumFeatures() != 0 || d.Meta.NumFeatures != 4 || d.Meta.NumFeatureNonzeros != nil {
		t.Fatalf("graph-only load: features %+v, meta %+v", d.Features, d.Meta)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := d.RequireFeatures(); !errors.Is(err, ErrNoFeatures) || !strings.Contains(err.Error(), "lost in a flood") {
		t.Fatalf("RequireFeatures: %v", err)
	}
}

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float32
	}{{"1", 1}, {"17", 17}, {"0.01934376", 0.01934376}, {"-2.5", -2.5}, {"1e-05", 1e-05}, {"3.4028235e+38", 3.4028235e+38},
		{"16777217", 16777216}, {"0.1", 0.1}} {
		got, err := parseValue([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("parseValue(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "x", "1_0", "0x10", "nan", "inf", "1e39", "--1", "1.2.3"} {
		if v, err := parseValue([]byte(in)); err == nil {
			t.Errorf("parseValue(%q) = %v, want an error", in, v)
		}
	}
	b := []byte("0.01934376")
	if n := testing.AllocsPerRun(100, func() { _, _ = parseValue(b) }); n != 0 {
		t.Errorf("parseValue allocates %v times", n)
	}
}

func TestWriteTextRoundTrip(t *testing.T) {
	d := loadTiny(t)
	dir := t.TempDir()
	if err := WriteText(dir, d); err != nil {
		t.Fatal(err)
	}
	back, err := LoadTextWith(os.DirFS(dir), ".", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDatasets(d, back); diff != "" {
		t.Fatalf("text round trip differs in %s", diff)
	}
}
