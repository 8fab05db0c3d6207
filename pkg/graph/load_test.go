package graph

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBuiltins(t *testing.T) {
	b := Builtins()
	if b[0] != "cora" || len(b) != 5 {
		t.Fatalf("Builtins() = %v", b)
	}
	b[0] = "changed"
	if Builtins()[0] != "cora" {
		t.Fatal("Builtins returns its internal slice")
	}
	for _, name := range Builtins() {
		if !isDir(filepath.Join(shippedDir, name)) {
			t.Errorf("builtin %s is not shipped in datasets/", name)
		}
	}
}

func TestLoadSpecs(t *testing.T) {
	t.Setenv(DataDirEnv, shippedDir)
	d, err := Load("cora", LoadOptions{})
	if err != nil || d.NumNodes() != 2708 {
		t.Fatalf("Load(cora): %v", err)
	}
	if d, err := Load("citeseer", LoadOptions{}); err != nil || d.NumNodes() != 3327 {
		t.Fatalf("Load(citeseer): %v", err)
	}
	_, err = Load("pubmed", LoadOptions{})
	if !errors.Is(err, ErrNoFeatures) || !strings.Contains(err.Error(), "ind.pubmed.allx") {
		t.Fatalf("Load(pubmed) = %v, want ErrNoFeatures with meta.json's missing note", err)
	}
	pub, err := Load("pubmed", LoadOptions{AllowMissingFeatures: true})
	if err != nil || pub.NumNodes() != 19717 {
		t.Fatalf("Load(pubmed, graph only): %v", err)
	}
	if d, err := Load(filepath.Join(shippedDir, "citeseer"), LoadOptions{}); err != nil || d.Name != "citeseer" {
		t.Fatalf("Load(dir): %v", err)
	}
	if d, err := Load(filepath.Join(shippedDir, "citeseer", "meta.json"), LoadOptions{}); err != nil || d.Name != "citeseer" {
		t.Fatalf("Load(meta.json): %v", err)
	}
	if d, err := Load("rmat:nodes=1000,edges=8000,features=4,classes=3,seed=1", LoadOptions{}); err != nil || d.Adj.NNZ() != 8000 {
		t.Fatalf("Load(rmat): %v", err)
	}
	if _, err := Load("rmat:nodes=1000,edges=8000,features=0", LoadOptions{}); !errors.Is(err, ErrNoFeatures) {
		t.Fatalf("Load(rmat without features) = %v, want ErrNoFeatures", err)
	}

	// Prepared: a file, a directory, and Prepare into both.
	dir := t.TempDir()
	file := filepath.Join(dir, "cora.bin")
	if err := Prepare("cora", file); err != nil {
		t.Fatal(err)
	}
	if err := Prepare("pubmed", dir+"/pub/"); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{file: "cora", filepath.Join(dir, "pub"): "pubmed", filepath.Join(dir, "pub", PreparedFileName): "pubmed"} {
		d, err := Load(spec, LoadOptions{AllowMissingFeatures: true})
		if err != nil || d.Name != want {
			t.Fatalf("Load(%s): %v", spec, err)
		}
	}
	if _, err := Load(filepath.Join(dir, "pub"), LoadOptions{}); !errors.Is(err, ErrNoFeatures) {
		t.Fatalf("prepared PubMed without AllowMissingFeatures: %v", err)
	}
	if diff := diffDatasets(d, must(Load(file, LoadOptions{}))); diff != "" {
		t.Fatalf("prepared cora differs in %s", diff)
	}
}

func must(d *Dataset, err error) *Dataset {
	if err != nil {
		panic(err)
	}
	return d
}

func TestLoadErrors(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(DataDirEnv, empty)
	_, err := Load("coauthor_cs", LoadOptions{})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(empty, "coauthor_cs")) ||
		!strings.Contains(err.Error(), "./datasets/coauthor_cs") {
		t.Fatalf("missing shipped dataset: %v (must name both places looked in)", err)
	}
	t.Setenv(DataDirEnv, "")
	if _, err := Load("coauthor_cs", LoadOptions{}); err == nil || !strings.Contains(err.Error(), "not set") {
		t.Fatalf("missing shipped dataset, no env: %v", err)
	}

	cut := filepath.Join(t.TempDir(), "cut")
	if err := os.MkdirAll(cut, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cut, PartitionFileName(0, 3)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(empty, "junk.bin")
	if err := os.WriteFile(junk, []byte("hello, world"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ spec, want string }{
		{"", "empty dataset spec"},
		{"no/such/place", "not a builtin"},
		{"rmat:nodes=10,edges=100", "N(N-1)/2"},
		{"rmat:nodes=10,edges=10,bogus=1", "unknown key"},
		{"rmat:nodes=x,edges=10", "not a non-negative integer"},
		{empty, "holds neither meta.json"},
		{cut, "holds the 3 partition files of `dorylus prepare --partitions 3`, not a whole dataset: train it with --graph-servers 3"},
		{junk, "not a prepared dataset file"},
	} {
		if _, err := Load(tc.spec, LoadOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%q) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
	if _, err := Load(junk, LoadOptions{}); !errors.Is(err, ErrNotPrepared) {
		t.Errorf("junk file: %v, want ErrNotPrepared", err)
	}
	if IsPreparedFile(junk) || IsPreparedFile(empty) {
		t.Error("IsPreparedFile accepts junk")
	}
	if !slices.Contains(Builtins(), "pubmed") {
		t.Error("pubmed not a builtin")
	}
}

func TestValidateCatches(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(d *Dataset)
		want   string
	}{
		{"nil adjacency", func(d *Dataset) { d.Adj = nil }, "no adjacency"},
		{"values", func(d *Dataset) { d.Adj.Val = make([]float32, 8) }, "Val nil"},
		{"bad offsets", func(d *Dataset) { d.Adj.RowPtr[2] = 100 }, "not monotone"},
		{"asymmetric", func(d *Dataset) { d.Adj.ColIdx[7] = 2 }, "no reverse"},
		{"self loop", func(d *Dataset) { d.Adj.ColIdx[6], d.Adj.ColIdx[7] = 3, 4 }, "self loop"},
		{"label range", func(d *Dataset) { d.Labels[1] = 2 }, "label 2 outside"},
		{"labels length", func(d *Dataset) { d.Labels = d.Labels[:4] }, "4 labels for 5 nodes"},
		{"split order", func(d *Dataset) { d.Test = []int32{4, 2} }, "out of order"},
		{"split overlap", func(d *Dataset) { d.Val = []int32{0} }, "both the train and the val split"},
		{"split unlabelled", func(d *Dataset) { d.Test = []int32{2, 3} }, "node 3 is unlabelled"},
		{"feature rows", func(d *Dataset) { d.Features.Sparse.Rows = 4 }, "4 rows for 5 nodes"},
		{"feature nan", func(d *Dataset) { d.Features.Sparse.Val[2] = float32(nan()) }, "is NaN"},
		{"both features", func(d *Dataset) { d.Features.Dense = newDense(5, 4) }, "both Sparse and Dense"},
		{"meta nodes", func(d *Dataset) { d.Meta.NumNodes = 6 }, "num_nodes is 6"},
		{"meta isolated", func(d *Dataset) { d.Meta.IsolatedNodes = 2 }, "isolated_nodes is 2"},
		{"meta features", func(d *Dataset) { d.Meta.FeaturesAvailable = false }, "features_available"},
		{"meta class counts", func(d *Dataset) { d.Meta.ClassCounts = []int64{1, 3} }, "class_counts"},
		{"meta name", func(d *Dataset) { d.Meta.Name = "other" }, "name is other"},
	} {
		d := loadTiny(t)
		tc.mutate(d)
		err := d.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want ErrInvalid containing %q", tc.name, err, tc.want)
		}
	}
	var nilDataset *Dataset
	if err := nilDataset.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil dataset: %v", err)
	}
}

// TestSymmetryChecks compares the fingerprint and the exact symmetry check on random graphs
// with one entry moved.
func TestSymmetryChecks(t *testing.T) {
	for seed := range uint64(50) {
		d, err := RMAT(RMATParams{Nodes: 50, Edges: 200, Classes: 1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		a := d.Adj
		if !likelySymmetric(a) || firstAsymmetric(a) != -1 {
			t.Fatalf("seed %d: symmetric graph reported asymmetric", seed)
		}
		// Move one entry of a row to a column the row lacks (keeping the row sorted).
		k := int64(seed) % a.NNZ()
		u, v := entryAt(a, k)
		row := a.ColIdx[a.RowPtr[u]:a.RowPtr[u+1]]
		for c := int32(0); c < int32(a.Cols); c++ {
			if _, has := slices.BinarySearch(row, c); !has && int(c) != u {
				row[k-a.RowPtr[u]] = c
				slices.Sort(row)
				break
			}
		}
		if likelySymmetric(a) {
			t.Fatalf("seed %d: moving entry (%d, %d) not detected by the fingerprint", seed, u, v)
		}
		if firstAsymmetric(a) < 0 {
			t.Fatalf("seed %d: moving entry (%d, %d) not detected exactly", seed, u, v)
		}
	}
}
