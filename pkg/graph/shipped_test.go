package graph

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// shippedDir is the repository's datasets folder, seen from this package's directory.
const shippedDir = "../../datasets"

// shippedCounts is the table of datasets/FORMAT.md.
var shippedCounts = []struct {
	name                            string
	nodes, edges, features, classes int
	train, val, test                int
	hasFeatures                     bool
}{
	{"cora", 2708, 10556, 1433, 7, 140, 500, 1000, true},
	{"citeseer", 3327, 9104, 3703, 6, 120, 500, 1000, true},
	{"pubmed", 19717, 88648, 500, 3, 60, 500, 1000, false},
	{"amazon_computers", 13752, 491722, 767, 10, 200, 300, 13252, true},
	{"coauthor_cs", 18333, 163788, 6805, 15, 300, 450, 17583, true},
}

// TestShippedDatasets loads every shipped dataset, checks its counts against FORMAT.md's table
// and its own meta.json, and round-trips it through the prepared format and the text writer.
func TestShippedDatasets(t *testing.T) {
	for _, want := range shippedCounts {
		t.Run(want.name, func(t *testing.T) {
			dir := filepath.Join(shippedDir, want.name)
			d, err := LoadTextWith(os.DirFS(dir), ".", LoadOptions{AllowMissingFeatures: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
			got := [...]int{d.NumNodes(), int(d.Adj.NNZ()), d.Meta.NumFeatures, d.NumClasses, len(d.Train), len(d.Val), len(d.Test)}
			table := [...]int{want.nodes, want.edges, want.features, want.classes, want.train, want.val, want.test}
			if got != table {
				t.Errorf("nodes, edges, features, classes, train, val, test = %v, FORMAT.md says %v", got, table)
			}
			if d.Features.Present() != want.hasFeatures || (want.hasFeatures && d.NumFeatures() != want.features) {
				t.Errorf("features present %v with %d columns, want %v", d.Features.Present(), d.NumFeatures(), want.hasFeatures)
			}

			raw, err := os.ReadFile(filepath.Join(dir, "meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			var meta struct {
				Nodes      int            `json:"num_nodes"`
				Edges      int64          `json:"num_edges"`
				Undirected int64          `json:"num_undirected_edges"`
				Nonzeros   *int64         `json:"num_feature_nonzeros"`
				Isolated   int64          `json:"isolated_nodes"`
				Classes    []int64        `json:"class_counts"`
				Splits     map[string]int `json:"split_sizes"`
				Missing    string         `json:"missing"`
				Extra      map[string]any `json:"-"`
			}
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			if meta.Nodes != d.NumNodes() || meta.Edges != d.Adj.NNZ() || meta.Undirected*2 != d.Adj.NNZ() ||
				meta.Isolated != isolatedNodes(d.Adj) || meta.Splits["train"] != len(d.Train) ||
				meta.Splits["val"] != len(d.Val) || meta.Splits["test"] != len(d.Test) {
				t.Errorf("counts differ from meta.json %+v", meta)
			}
			if want.hasFeatures && (meta.Nonzeros == nil || *meta.Nonzeros != int64(len(d.Features.Sparse.ColIdx))) {
				t.Errorf("feature nonzeros %d, meta.json says %v", len(d.Features.Sparse.ColIdx), meta.Nonzeros)
			}
			cc := classCounts(d.Labels, d.NumClasses)
			for c := range cc {
				if cc[c] != meta.Classes[c] {
					t.Errorf("class %d has %d nodes, meta.json says %d", c, cc[c], meta.Classes[c])
				}
			}
			if !want.hasFeatures {
				if _, err := LoadText(os.DirFS(dir), "."); err == nil {
					t.Error("LoadText accepted a dataset without features")
				}
				if d.Meta.Missing == "" || d.Meta.Missing != meta.Missing {
					t.Errorf("missing note %q lost", d.Meta.Missing)
				}
			}

			// text -> Dataset -> binary -> Dataset
			path := filepath.Join(t.TempDir(), "d.dorylus")
			if err := WritePreparedFile(path, d); err != nil {
				t.Fatal(err)
			}
			back, err := ReadPrepared(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffDatasets(d, back); diff != "" {
				t.Errorf("prepared round trip differs in %s", diff)
			}

			// Dataset -> text -> Dataset (the small ones; the writer is the same code for all)
			if d.Adj.NNZ() < 200000 {
				tdir := t.TempDir()
				if err := WriteText(tdir, d); err != nil {
					t.Fatal(err)
				}
				again, err := LoadTextWith(os.DirFS(tdir), ".", LoadOptions{AllowMissingFeatures: true})
				if err != nil {
					t.Fatal(err)
				}
				if diff := diffDatasets(d, again); diff != "" {
					t.Errorf("text round trip differs in %s", diff)
				}
				// The writer reproduces the shipped files byte for byte (after decompression).
				for _, f := range []string{d.Meta.EdgeFile, "features.txt.gz", "labels.txt", "train.txt", "val.txt", "test.txt"} {
					orig, err1 := readMaybeGzip(filepath.Join(dir, f))
					mine, err2 := readMaybeGzip(filepath.Join(tdir, f))
					if os.IsNotExist(err1) && os.IsNotExist(err2) {
						continue
					}
					if err1 != nil || err2 != nil {
						t.Fatal(err1, err2)
					}
					if !bytes.Equal(orig, mine) {
						t.Errorf("written %s differs from the shipped one", f)
					}
				}
			}
		})
	}
}

func readMaybeGzip(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil || filepath.Ext(path) != ".gz" {
		return b, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
