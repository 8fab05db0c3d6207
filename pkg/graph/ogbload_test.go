package graph

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// diffStructures returns "" when a and b hold the same graph, features, labels and split,
// else the first field that differs; their metas (which say where each came from) may differ.
func diffStructures(a, b *Dataset) string {
	a2, b2 := *a, *b
	a2.Meta, b2.Meta = Meta{}, Meta{}
	return diffDatasets(&a2, &b2)
}

// TestOGBLayoutMatchesText writes Cora in OGB's layout and reads it back: the same CSR,
// features (sparse, as the text layout's), labels and split.
func TestOGBLayoutMatchesText(t *testing.T) {
	text := must(Load("cora", LoadOptions{}))
	dir := filepath.Join(t.TempDir(), "cora")
	if err := WriteOGB(dir, text); err != nil {
		t.Fatal(err)
	}
	ogb, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffStructures(text, ogb); diff != "" {
		t.Fatalf("the OGB layout of cora differs from the text layout in %s", diff)
	}
	m := ogb.Meta
	if *m.RawAdjacencyPairs != text.Meta.NumUndirectedEdges || m.SelfLoopsRemoved != 0 || m.NumFeatureNonzeros == nil || *m.NumFeatureNonzeros != *text.Meta.NumFeatureNonzeros {
		t.Errorf("meta: raw pairs %d, self loops %d, nonzeros %v; want %d, 0, %d", *m.RawAdjacencyPairs, m.SelfLoopsRemoved, m.NumFeatureNonzeros, text.Meta.NumUndirectedEdges, *text.Meta.NumFeatureNonzeros)
	}
	want := "edge list made symmetric: each of the 5278 pairs of " + filepath.Join(dir, "raw/edge.csv.gz") + " entered in both directions, 0 repeated entries merged, 0 self loops dropped"
	if m.Conversion != want {
		t.Errorf("meta conversion %q, want %q", m.Conversion, want)
	}
	if f, err := DetectFormat(dir); f != FormatOGB || err != nil {
		t.Errorf("DetectFormat = %q, %v; want ogb", f, err)
	}
	if _, err := Load(dir, LoadOptions{Format: FormatText}); err == nil || !strings.Contains(err.Error(), "is in the ogb layout, not the text layout") {
		t.Errorf("Load with format text: %v, want a refusal naming both layouts", err)
	}
}

// ogbTinyFiles are a directed graph of 5 nodes with a repeated pair, a pair listed both ways
// and a self loop; node 3 is unlabelled, labels are written as OGB's float CSV may write them.
var ogbTinyFiles = map[string]string{
	"raw/num-node-list.csv.gz": "5\n",
	"raw/num-edge-list.csv.gz": "6\n",
	"raw/edge.csv.gz":          "1,0\n0,2\n2,1\n1,2\n3,3\n4,3\n",
	"raw/node-feat.csv.gz":     "1,0,0.5\n0,0,0\n0,3,0\n-2.25,0,0\n1,1,1\n",
	"raw/node-label.csv.gz":    "0\n1.0\n0\nnan\n1\n",
	"split/s/train.csv.gz":     "4\n0\n",
	"split/s/valid.csv.gz":     "1\n",
	"split/s/test.csv.gz":      "2\n",
}

// ogbTiny returns ogbTinyFiles, gzipped, as directory "o" of a MapFS.
func ogbTiny(t testing.TB) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, data := range ogbTinyFiles {
		fsys["o/"+name] = &fstest.MapFile{Data: gz(t, data)}
	}
	return fsys
}

func TestOGBTiny(t *testing.T) {
	d, err := LoadOGB(ogbTiny(t), "o", "o", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Triangle 0-1-2 (1-2 given both ways), edge 3-4; the self loop 3,3 dropped.
	wantAdj := &tensor.CSR{Rows: 5, Cols: 5, RowPtr: []int64{0, 2, 4, 6, 7, 8}, ColIdx: []int32{1, 2, 0, 2, 0, 1, 4, 3}}
	if !d.Adj.Equal(wantAdj) {
		t.Errorf("adjacency %v %v, want %v %v", d.Adj.RowPtr, d.Adj.ColIdx, wantAdj.RowPtr, wantAdj.ColIdx)
	}
	if want := []int32{0, 1, 0, -1, 1}; !slices.Equal(d.Labels, want) || d.NumClasses != 2 {
		t.Errorf("labels %v, %d classes; want %v, 2", d.Labels, d.NumClasses, want)
	}
	if !slices.Equal(d.Train, []int32{0, 4}) || !slices.Equal(d.Val, []int32{1}) || !slices.Equal(d.Test, []int32{2}) {
		t.Errorf("split %v %v %v, want [0 4] [1] [2]", d.Train, d.Val, d.Test)
	}
	x := d.Features.Sparse // 6 of 15 values nonzero: held sparse
	if x == nil || !slices.Equal(x.ColIdx, []int32{0, 2, 1, 0, 0, 1, 2}) || !slices.Equal(x.Val, []float32{1, 0.5, 3, -2.25, 1, 1, 1}) {
		t.Errorf("features %+v, want sparse rows of the CSV's nonzeros", d.Features)
	}
	m := d.Meta
	if m.SelfLoopsRemoved != 1 || *m.RawAdjacencyPairs != 6 || m.NumEdges != 8 || !slices.Equal(m.UnlabeledNodes, []int32{3}) || m.Split != "OGB split s" {
		t.Errorf("meta %+v", m)
	}
	if want := "edge list made symmetric: each of the 6 pairs of o/raw/edge.csv.gz entered in both directions, 2 repeated entries merged, 1 self loops dropped"; m.Conversion != want {
		t.Errorf("conversion %q, want %q", m.Conversion, want)
	}
}

func TestOGBDenseFeaturesStayDense(t *testing.T) {
	fsys := ogbTiny(t)
	fsys["o/raw/node-feat.csv.gz"] = &fstest.MapFile{Data: gz(t, "1,2\n3,4\n5,0\n0,6\n7,8\n")}
	d, err := LoadOGB(fsys, "o", "o", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if x := d.Features.Dense; x == nil || x.Cols != 2 || !slices.Equal(x.Data, []float32{1, 2, 3, 4, 5, 0, 0, 6, 7, 8}) {
		t.Errorf("features %+v, want the dense 5×2 matrix", d.Features)
	}
}

func TestOGBMissingFeatures(t *testing.T) {
	fsys := ogbTiny(t)
	delete(fsys, "o/raw/node-feat.csv.gz")
	if _, err := LoadOGB(fsys, "o", "o", LoadOptions{}); !errors.Is(err, ErrNoFeatures) || !strings.Contains(err.Error(), "o/raw/node-feat.csv.gz is absent") {
		t.Errorf("err = %v, want ErrNoFeatures naming the file", err)
	}
	d, err := LoadOGB(fsys, "o", "o", LoadOptions{AllowMissingFeatures: true})
	if err != nil || d.Features.Present() {
		t.Fatalf("with AllowMissingFeatures: %v, features %v", err, d.Features.Present())
	}
}

func TestOGBSplitChoice(t *testing.T) {
	fsys := ogbTiny(t)
	for _, f := range ogbSplitFiles {
		fsys["o/split/t/"+f] = fsys["o/split/s/"+f]
	}
	if _, err := LoadOGB(fsys, "o", "o", LoadOptions{}); err == nil || !strings.Contains(err.Error(), "o/split: holds 2 splits [s t]; name one") {
		t.Errorf("two splits, none named: %v", err)
	}
	if d, err := LoadOGB(fsys, "o", "o", LoadOptions{Split: "t"}); err != nil || d.Meta.Split != "OGB split t" {
		t.Errorf("split t: %v", err)
	}
}

func TestOGBMalformed(t *testing.T) {
	for _, c := range []struct {
		file, data, want string
	}{
		{"raw/num-node-list.csv.gz", "", "o/raw/num-node-list.csv.gz line 1: empty file"},
		{"raw/num-node-list.csv.gz", "five\n", "o/raw/num-node-list.csv.gz line 1, column 1: expected a count"},
		{"raw/num-node-list.csv.gz", "5\n7\n", "o/raw/num-node-list.csv.gz line 2, column 1: a second line: the layout holds one graph"},
		{"raw/num-node-list.csv.gz", "3000000000\n", "line 1, column 1: count 3000000000 exceeds 2147483647"},
		{"raw/edge.csv.gz", "1,0\n0 2\n2,1\n1,2\n3,3\n4,3\n", "o/raw/edge.csv.gz line 2, column 2: expected a comma after src"},
		{"raw/edge.csv.gz", "1,0\n0,2\n2,\n1,2\n3,3\n4,3\n", "o/raw/edge.csv.gz line 3, column 3: expected a dst node id"},
		{"raw/edge.csv.gz", "1,0\n0,2\n2,1\n1,2x\n3,3\n4,3\n", "o/raw/edge.csv.gz line 4, column 4: unexpected \"x\" after dst"},
		{"raw/edge.csv.gz", "1,0\n0,2\n2,1\n1,2\n3,3\n4,5\n", "o/raw/edge.csv.gz line 6, column 3: dst node id 5 out of range [0, raw/num-node-list.csv.gz = 5)"},
		{"raw/edge.csv.gz", "1,0\n0,2\n2,1\n1,2\n9,3\n4,3\n", "o/raw/edge.csv.gz line 5, column 1: src node id 9 out of range"},
		{"raw/edge.csv.gz", "1,0\n0,2\n2,1\n", "o/raw/edge.csv.gz line 4: file ends after 3 edges, raw/num-edge-list.csv.gz = 6"},
		{"raw/edge.csv.gz", "1,0\n0,2\n2,1\n1,2\n3,3\n4,3\n0,1\n", "o/raw/edge.csv.gz line 7: more than raw/num-edge-list.csv.gz = 6 edges"},
		{"raw/edge.csv.gz", "1,0\r\n", "o/raw/edge.csv.gz line 1, column 4: carriage return"},
		{"raw/node-label.csv.gz", "0\n1\n0\nx\n1\n", "o/raw/node-label.csv.gz line 4, column 1: label \"x\" is not a class"},
		{"raw/node-label.csv.gz", "0\n1\n-1\nnan\n1\n", "o/raw/node-label.csv.gz line 3, column 1: label \"-1\" is not a class"},
		{"raw/node-label.csv.gz", "0\n1\n0.5\nnan\n1\n", "o/raw/node-label.csv.gz line 3, column 1: label \"0.5\" is not a class"},
		{"raw/node-label.csv.gz", "0\n1\n0\n", "o/raw/node-label.csv.gz line 4: file ends after 3 lines, raw/num-node-list.csv.gz = 5"},
		{"raw/node-label.csv.gz", "nan\nnan\nnan\nnan\nnan\n", "o/raw/node-label.csv.gz line 1: no node is labelled"},
		{"raw/node-feat.csv.gz", "1,0,0.5\n0,0\n0,3,0\n-2.25,0,0\n1,1,1\n", "o/raw/node-feat.csv.gz line 2, column 4: 2 values, line 1 has 3"},
		{"raw/node-feat.csv.gz", "1,0,0.5\n0,0,0,1\n0,3,0\n-2.25,0,0\n1,1,1\n", "o/raw/node-feat.csv.gz line 2, column 7: more than the 3 values of line 1"},
		{"raw/node-feat.csv.gz", "1,0,0.5\n0,0,0\n0,x,0\n-2.25,0,0\n1,1,1\n", "o/raw/node-feat.csv.gz line 3, column 3: value 2: value \"x\" is not a decimal number"},
		{"raw/node-feat.csv.gz", "1,0,0.5\n0,0,0\n0,,0\n-2.25,0,0\n1,1,1\n", "o/raw/node-feat.csv.gz line 3, column 3: value 2: empty value"},
		{"raw/node-feat.csv.gz", "1,0,0.5\n0,0,0\n0,1e39,0\n-2.25,0,0\n1,1,1\n", "line 3, column 3: value 2: value \"1e39\" overflows float32"},
		{"raw/node-feat.csv.gz", "1,0,0.5\n", "o/raw/node-feat.csv.gz line 2: file ends after 1 lines, raw/num-node-list.csv.gz = 5"},
		{"split/s/train.csv.gz", "4\n0\n0\n", "o/split/s/train.csv.gz line 3, column 1: node 0 listed twice"},
		{"split/s/train.csv.gz", "4\n1\n", "o/split/s/valid.csv.gz line 1, column 1: node 1 is also in the train split"},
		{"split/s/train.csv.gz", "4\n3\n", "o/split/s/train.csv.gz line 2, column 1: node 3 is unlabelled (nan in raw/node-label.csv.gz)"},
		{"split/s/test.csv.gz", "2\n5\n", "o/split/s/test.csv.gz line 2, column 1: node id 5 out of range [0, 5)"},
		{"split/s/test.csv.gz", "2 \n", "o/split/s/test.csv.gz line 1, column 1: expected a node id, got \"2 \""},
	} {
		fsys := ogbTiny(t)
		fsys["o/"+c.file] = &fstest.MapFile{Data: gz(t, c.data)}
		d, err := LoadOGB(fsys, "o", "o", LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrMalformed) || d != nil {
			t.Errorf("%s %q: %v, want a *ParseError containing %q and no dataset", c.file, c.data, err, c.want)
		}
	}
	fsys := ogbTiny(t)
	fsys["o/raw/edge.csv.gz"] = &fstest.MapFile{Data: []byte("1,0\n")}
	if _, err := LoadOGB(fsys, "o", "o", LoadOptions{}); err == nil || !strings.Contains(err.Error(), "o/raw/edge.csv.gz line 1: not a gzip file") {
		t.Errorf("plain text for a .gz: %v", err)
	}
	delete(fsys, "o/split/s/valid.csv.gz")
	fsys["o/raw/edge.csv.gz"] = ogbTiny(t)["o/raw/edge.csv.gz"]
	if _, err := LoadOGB(fsys, "o", "o", LoadOptions{}); err == nil || !strings.Contains(err.Error(), "o/split/s/valid.csv.gz: missing or unreadable file") {
		t.Errorf("no valid split: %v", err)
	}
}
