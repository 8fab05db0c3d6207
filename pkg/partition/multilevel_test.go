package partition

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition/shapes"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// ringOfClusters returns clusters circulant graphs of size vertices each (vertex i joined to
// i±1..i±reach within its cluster, so every vertex has degree 2·reach), with cluster c joined to
// cluster c+1 (mod clusters) by one edge, under a random numbering; and each vertex's cluster.
func ringOfClusters(clusters, size, reach int, seed uint64) (*tensor.CSR, []int32) {
	n := clusters * size
	id := rand.New(rand.NewPCG(seed, 1)).Perm(n)
	cluster := make([]int32, n)
	var edges [][2]int32
	for c := range clusters {
		for i := range size {
			cluster[id[c*size+i]] = int32(c)
			for d := 1; d <= reach; d++ {
				edges = append(edges, [2]int32{int32(id[c*size+i]), int32(id[c*size+(i+d)%size])})
			}
		}
		next := (c + 1) % clusters
		edges = append(edges, [2]int32{int32(id[c*size]), int32(id[next*size+size/2])})
	}
	return shapes.FromEdges(n, edges), cluster
}

// TestMultilevelCutsAlongClusters: 8 dense clusters joined in a ring by one edge each are cut
// exactly along the clusters into 8 parts (only the 8 ring edges cut), and for fewer parts no
// cluster is split.
func TestMultilevelCutsAlongClusters(t *testing.T) {
	adj, cluster := ringOfClusters(8, 150, 8, 5)
	for _, k := range []int{2, 4, 8} {
		plan, err := Multilevel(adj, k, Options{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		q := Measure(adj, plan)
		if (k == 8 && q.Cut != 16) || q.Cut > 16 || q.Balance > 1.05 {
			t.Errorf("%d parts: %v; want at most the 8 ring edges (16 entries) cut, all of them for 8 parts", k, q)
		}
		owner := plan.Owners()
		for v, c := range cluster {
			if owner[v] != owner[slices.Index(cluster, c)] {
				t.Fatalf("%d parts: cluster %d split between parts", k, c)
			}
		}
	}
}

// TestMultilevelDeterministic: the same graph, parts and seed give the same plan.
func TestMultilevelDeterministic(t *testing.T) {
	d := rmat(t, 3000, 40000, 0)
	for _, k := range []int{3, 8} {
		a, err := Multilevel(d.Adj, k, Options{Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Multilevel(d.Adj, k, Options{Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Bounds, b.Bounds) || !slices.Equal(a.Perm, b.Perm) {
			t.Errorf("%d parts: two runs with seed 11 differ", k)
		}
	}
}

// TestMultilevelBalanceAndQuality: on graphs of several shapes and part counts the heaviest part
// stays within the bound (default 5%, and a tighter 2%), no part is empty, and the cut is far
// below the contiguous cut's.
func TestMultilevelBalanceAndQuality(t *testing.T) {
	t.Setenv(graph.DataDirEnv, filepath.Join("..", "..", "datasets"))
	graphs := map[string]*tensor.CSR{"cora": cora(t).Adj, "rmat-10k-150k": rmat(t, 10000, 150000, 0).Adj}
	ring, _ := ringOfClusters(5, 97, 3, 9)
	graphs["ring-5x97"] = ring
	for name, adj := range graphs {
		for _, k := range []int{2, 3, 5, 8, 16} {
			for _, imb := range []float64{0, 0.02} {
				plan, err := Multilevel(adj, k, Options{Seed: 1, Imbalance: imb})
				if err != nil {
					t.Fatal(err)
				}
				q := Measure(adj, plan)
				bound := 1 + imb
				if imb == 0 {
					bound = 1.05
				}
				if q.Balance > bound+1e-9 {
					t.Errorf("%s, %d parts, imbalance %v: balance %.4f above %.2f", name, k, imb, q.Balance, bound)
				}
				for p := range k {
					if plan.Bounds[p+1] <= plan.Bounds[p] {
						t.Errorf("%s, %d parts: part %d empty", name, k, p)
					}
				}
				base, _ := Contiguous(adj.RowPtr, k)
				if c := Measure(adj, base); q.CutRatio > 0.9*c.CutRatio {
					t.Errorf("%s, %d parts: cut %.4f, contiguous %.4f", name, k, q.CutRatio, c.CutRatio)
				}
			}
		}
	}
}

// TestMultilevelPubMedAgainstMETIS: PubMed's cut at 2, 4 and 8 parts stays within 1.25× the cut
// METIS 5.1 (gpmetis -ufactor=50, vertex weights 1 + degree) made of it: 0.0318, 0.0719, 0.1327
// (measured with hack/bench/partition).
func TestMultilevelPubMedAgainstMETIS(t *testing.T) {
	t.Setenv(graph.DataDirEnv, filepath.Join("..", "..", "datasets"))
	d, err := graph.Load("pubmed", graph.LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	for k, metis := range map[int]float64{2: 0.0318, 4: 0.0719, 8: 0.1327} {
		plan, err := Default(d.Adj, k)
		if err != nil {
			t.Fatal(err)
		}
		if q := Measure(d.Adj, plan); q.CutRatio > 1.25*metis || q.Balance > 1.05 {
			t.Errorf("%d parts: %v; METIS cut %.4f", k, q, metis)
		}
	}
}

func TestMultilevelBadInput(t *testing.T) {
	adj, _ := ringOfClusters(2, 10, 2, 1)
	bad := *adj
	bad.ColIdx = slices.Clone(adj.ColIdx)
	bad.ColIdx[3] = 99
	for _, tc := range []struct {
		name  string
		adj   *tensor.CSR
		parts int
		want  string
	}{
		{"more parts than vertices", adj, 21, "21 parts of a 20-vertex graph"},
		{"no parts", adj, 0, "0 parts"},
		{"vertex out of range", &bad, 2, "names vertex 99 of 20"},
		{"not square", &tensor.CSR{Rows: 2, Cols: 3, RowPtr: []int64{0, 0, 0}}, 1, "2×3"},
	} {
		_, err := Multilevel(tc.adj, tc.parts, Options{})
		if !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrPlan saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := FromOwners([]int32{0, 2, 1}, 2); !errors.Is(err, ErrPlan) {
		t.Errorf("owner outside the parts: %v", err)
	}
	if _, err := FromOwners([]int32{0, 0, 0}, 2); !errors.Is(err, ErrPlan) {
		t.Errorf("empty part: %v", err)
	}
}

func TestMethods(t *testing.T) {
	if m, err := ParseMethod(""); err != nil || m != DefaultMethod || DefaultMethod != MethodMultilevel {
		t.Errorf(`ParseMethod("") = %q, %v; want the default, multilevel`, m, err)
	}
	if _, err := ParseMethod("metis"); err == nil || !strings.Contains(err.Error(), "multilevel, contiguous, label-propagation") {
		t.Errorf("unknown method: %v", err)
	}
	adj := cora(t).Adj
	for _, m := range Methods() {
		if got, err := ParseMethod(string(m)); err != nil || got != m {
			t.Errorf("ParseMethod(%q) = %q, %v", m, got, err)
		}
		plan, err := New(adj, 4, m)
		if err != nil {
			t.Fatal(err)
		}
		if q := Measure(adj, plan); q.Parts != 4 || q.Balance > 1.06 {
			t.Errorf("%s: %v", m, q)
		}
	}
}

// TestCheckFiles: a directory of one partitioning passes with its quality; a file of another
// dataset, of another partitioning of the same dataset, of another part count, or corrupted is
// refused with an error naming the file and what is wrong.
func TestCheckFiles(t *testing.T) {
	t.Setenv(graph.DataDirEnv, filepath.Join("..", "..", "datasets"))
	c := cora(t)
	cite, err := graph.Load("citeseer", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(d *graph.Dataset, parts int, m Method) (string, Quality) {
		dir := t.TempDir()
		plan, err := New(d.Adj, parts, m)
		if err != nil {
			t.Fatal(err)
		}
		q, err := WriteDataset(d, plan, dir)
		if err != nil {
			t.Fatal(err)
		}
		return dir, q
	}
	good, want := write(c, 3, MethodMultilevel)
	if q, err := CheckFiles(good, 3); err != nil || q != want {
		t.Fatalf("CheckFiles = %v, %v; want %v", q, err, want)
	}
	name1 := graph.PartitionFileName(1, 3)
	swap := func(from string) string {
		dir := t.TempDir()
		for p := range 3 {
			src := good
			if p == 1 {
				src = from
			}
			raw, err := os.ReadFile(filepath.Join(src, graph.PartitionFileName(p, 3)))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, graph.PartitionFileName(p, 3)), raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	otherData, _ := write(cite, 3, MethodMultilevel)
	otherPlan, _ := write(c, 3, MethodContiguous)
	corrupt := swap(good)
	raw, err := os.ReadFile(filepath.Join(corrupt, name1))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x10
	if err := os.WriteFile(filepath.Join(corrupt, name1), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		parts     int
		want      string
	}{
		{"another dataset", swap(otherData), 3, "dataset citeseer"},
		{"another partitioning", swap(otherPlan), 3, "another partitioning of cora"},
		{"corrupted", corrupt, 3, "checksum mismatch"},
		{"another part count", good, 2, graph.PartitionFileName(0, 2)},
	} {
		_, err := CheckFiles(tc.dir, tc.parts)
		t.Logf("%s: %v", tc.name, err)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
		if err != nil && tc.parts == 3 && !strings.Contains(err.Error(), name1) {
			t.Errorf("%s: error %v does not name %s", tc.name, err, name1)
		}
	}
}

// TestContractInBlocks: coarse levels built by several workers in many blocks give the plan of
// one block built by one worker.
func TestContractInBlocks(t *testing.T) {
	d := rmat(t, 3000, 40000, 0)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	want, err := Multilevel(d.Adj, 4, Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int64) { contractBlockEntries = old }(contractBlockEntries)
	contractBlockEntries = 50
	for _, procs := range []int{1, 3} {
		runtime.GOMAXPROCS(procs)
		got, err := Multilevel(d.Adj, 4, Options{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Bounds, want.Bounds) || !slices.Equal(got.Perm, want.Perm) {
			t.Errorf("%d workers on blocks of %d entries gave another plan", procs, contractBlockEntries)
		}
	}
}

// TestMultilevelSpill: building the coarse levels in temporary files (releasing the levels not
// kept before reading the next back) gives the same plan as building them in memory, leaves no
// file behind, and a spill folder that cannot be written to is an error that names it. With
// Options.Reload the finest level is released too and read back once: the same plan again; a
// failed or short reload is an error.
func TestMultilevelSpill(t *testing.T) {
	d := rmat(t, 3000, 40000, 0)
	defer func(old int) { keepAlways = old }(keepAlways)
	keepAlways = 1000 // skip levels, as large skewed graphs do
	want, err := Multilevel(d.Adj, 4, Options{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int64) { spillAbove = old }(spillAbove)
	spillAbove = 1000
	dir := t.TempDir()
	got, err := Multilevel(d.Adj, 4, Options{Seed: 2, SpillDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Bounds, want.Bounds) || !slices.Equal(got.Perm, want.Perm) {
		t.Error("spilled and in-memory levels gave different plans")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d spill files left behind", len(left))
	}
	missing := filepath.Join(dir, "missing")
	if _, err := Multilevel(d.Adj, 4, Options{Seed: 2, SpillDir: missing}); err == nil || !strings.Contains(err.Error(), "spill") {
		t.Errorf("spilling into a missing folder: %v", err)
	}

	cols := slices.Clone(d.Adj.ColIdx)
	adj := &tensor.CSR{Rows: d.Adj.Rows, Cols: d.Adj.Cols, RowPtr: d.Adj.RowPtr, ColIdx: slices.Clone(cols)}
	reloads := 0
	reload := func() ([]int32, error) {
		reloads++
		if adj.ColIdx != nil {
			t.Error("the finest level was not released before its reload")
		}
		return slices.Clone(cols), nil
	}
	got, err = Multilevel(adj, 4, Options{Seed: 2, SpillDir: dir, Reload: reload})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Bounds, want.Bounds) || !slices.Equal(got.Perm, want.Perm) {
		t.Error("a reloaded finest level gave another plan")
	}
	if reloads != 1 || !slices.Equal(adj.ColIdx, cols) {
		t.Errorf("%d reloads; the adjacency returned equal to the input: %v", reloads, slices.Equal(adj.ColIdx, cols))
	}
	for _, tc := range []struct {
		reload func() ([]int32, error)
		want   string
	}{
		{func() ([]int32, error) { return nil, errors.New("disk gone") }, "disk gone"},
		{func() ([]int32, error) { return cols[1:], nil }, "read again"},
	} {
		adj.ColIdx = slices.Clone(cols)
		if _, err := Multilevel(adj, 4, Options{Seed: 2, SpillDir: dir, Reload: tc.reload}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reload failing with %q: %v", tc.want, err)
		}
	}
}

// TestManifest: the manifest written beside the files describes them; a directory of another
// part count, a file of another partitioning or dataset, and a manifest of more parts than
// vertices are refused with errors naming the file and what is wrong.
func TestManifest(t *testing.T) {
	t.Setenv(graph.DataDirEnv, filepath.Join("..", "..", "datasets"))
	c := cora(t)
	cite, err := graph.Load("citeseer", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(d *graph.Dataset, m Method) string {
		dir := t.TempDir()
		plan, err := New(d.Adj, 3, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := WriteDataset(d, plan, dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	good := write(c, MethodMultilevel)
	m, err := ReadManifest(good)
	if err != nil {
		t.Fatal(err)
	}
	q, err := CheckFiles(good, 3)
	if err != nil || m.Dataset != "cora" || m.Nodes != c.NumNodes() || m.Edges != c.Adj.NNZ() || m.Method != MethodMultilevel || m.Quality != q {
		t.Fatalf("manifest %+v, files %v, %v", m, q, err)
	}
	if err := m.CheckHeaders(good); err != nil {
		t.Fatal(err)
	}
	if err := m.Require(good, 2); err == nil || !strings.Contains(err.Error(), "holds 3 partitions of cora, want 2") {
		t.Errorf("another part count: %v", err)
	}
	name1 := graph.PartitionFileName(1, 3)
	for _, tc := range []struct {
		dir, want string
	}{{write(c, MethodContiguous), "another partitioning of cora"}, {write(cite, MethodMultilevel), "holds dataset citeseer"}} {
		path := filepath.Join(tc.dir, name1)
		d, err := graph.ReadPartitionFile(path, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		err = m.CheckPart(path, d)
		t.Logf("%v", err)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming it and saying %q", path, err, tc.want)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		mixed := filepath.Join(t.TempDir(), "mixed")
		if err := os.CopyFS(mixed, os.DirFS(good)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mixed, name1), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.CheckHeaders(mixed); err == nil || !strings.Contains(err.Error(), filepath.Join(mixed, name1)) {
			t.Errorf("a swapped %s passed the launcher's check: %v", name1, err)
		}
	}
	m.Parts, m.Nodes = 3, 2
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(good, ManifestFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(good); err == nil || !strings.Contains(err.Error(), "3 partitions of 2 vertices") {
		t.Errorf("more parts than vertices: %v", err)
	}
}
