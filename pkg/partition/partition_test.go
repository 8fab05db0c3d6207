package partition

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

func rmat(t testing.TB, nodes, edges, features int) *graph.Dataset {
	t.Helper()
	d, err := graph.RMAT(graph.RMATParams{Nodes: nodes, Edges: edges, Features: features, Classes: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func cora(t testing.TB) *graph.Dataset {
	t.Helper()
	d, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// parts writes d's partitions under plan and builds every part from its file.
func parts(t *testing.T, d *graph.Dataset, plan Plan) []*Part {
	t.Helper()
	dir := t.TempDir()
	if _, err := WriteDataset(d, plan, dir); err != nil {
		t.Fatal(err)
	}
	out := make([]*Part, plan.Parts())
	for p := range out {
		pd, err := graph.ReadPartitionFile(dir, p, plan.Parts())
		if err != nil {
			t.Fatal(err)
		}
		if out[p], err = Build(pd); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func randomDense(rng *rand.Rand, r, c int) *tensor.Dense {
	x := tensor.NewDense(r, c)
	for i := range x.Data {
		x.Data[i] = float32(rng.NormFloat64())
	}
	return x
}

// local gathers the rows of x (indexed by new global id) that part p holds: owned then ghosts.
func local(p *Part, x *tensor.Dense) *tensor.Dense {
	out := tensor.NewDense(p.Owned+len(p.Ghosts), x.Cols)
	for r := range p.Owned {
		copy(out.Row(r), x.Row(p.Lo+r))
	}
	for i, g := range p.Ghosts {
		copy(out.Row(p.Owned+i), x.Row(int(g)))
	}
	return out
}

func closeTo(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestLocalGatherMatchesGlobal checks that every part's local Â, fed its owned and ghost rows,
// gathers exactly the rows the whole graph's Â gives, that the send lists mirror the ghost
// blocks, and that the intervals' transposed ghost blocks push Âᵀ's contributions.
func TestLocalGatherMatchesGlobal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, d := range map[string]*graph.Dataset{"cora": cora(t), "rmat": rmat(t, 500, 6000, 0)} {
		for _, refine := range []bool{false, true} {
			plan, err := Contiguous(d.Adj.RowPtr, 3)
			if err != nil {
				t.Fatal(err)
			}
			if refine {
				if plan, err = Refine(d.Adj, plan, RefineOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// The whole graph in the plan's numbering.
			adj := graph.NormalizedAdjacency(renumber(d.Adj, plan))
			x := randomDense(rng, d.NumNodes(), 5)
			want := tensor.NewDense(d.NumNodes(), 5)
			tensor.SpMM(want, adj, x)
			ps := parts(t, d, plan)
			push := tensor.NewDense(d.NumNodes(), 5) // Âᵀ x assembled from the parts
			for _, p := range ps {
				got := tensor.NewDense(p.Owned, 5)
				tensor.SpMM(got, p.Adj, local(p, x))
				closeTo(t, name+" gather", got.Data, want.Data[p.Lo*5:(p.Lo+p.Owned)*5])
				for q, rows := range p.SendTo {
					mirror := ps[q].Ghosts[ps[q].GhostStart[p.ID]:ps[q].GhostStart[p.ID+1]]
					if len(rows) != len(mirror) {
						t.Fatalf("%s: part %d sends %d rows to %d, which holds %d ghosts of it", name, p.ID, len(rows), q, len(mirror))
					}
					for i, r := range rows {
						if int32(p.Lo)+r != mirror[i] {
							t.Fatalf("%s: send list %d→%d differs from the ghost block at %d", name, p.ID, q, i)
						}
					}
				}
				ivs, err := p.Cut(4)
				if err != nil {
					t.Fatal(err)
				}
				own := local(p, x).RowSlice(0, p.Owned)
				loc := tensor.NewDense(p.Owned, 5)
				tensor.SpMM(loc, p.AdjLocal, own)
				for r := range p.Owned {
					v := push.Row(p.Lo + r)
					for j, y := range loc.Row(r) {
						v[j] += y
					}
				}
				next := 0
				for _, iv := range ivs {
					if iv.Lo != next || iv.Rows() < 1 {
						t.Fatalf("%s: intervals do not tile the rows: %+v", name, iv)
					}
					next = iv.Hi
					c := tensor.NewDense(iv.GhostT.Rows, 5)
					tensor.SpMM(c, iv.GhostT, own)
					for q := range p.Parts {
						for k := iv.TouchedStart[q]; k < iv.TouchedStart[q+1]; k++ {
							row := push.Row(int(ps[q].Bounds[q]) + int(iv.TouchedRows[k]))
							for j, y := range c.Row(k) {
								row[j] += y
							}
						}
					}
				}
				if next != p.Owned {
					t.Fatalf("%s: intervals end at %d of %d rows", name, next, p.Owned)
				}
			}
			closeTo(t, name+" Âᵀ push", push.Data, want.Data) // Â is symmetric
		}
	}
}

// renumber returns adj in the plan's numbering.
func renumber(adj *tensor.CSR, plan Plan) *tensor.CSR {
	if plan.Perm == nil {
		return adj
	}
	inv := make([]int32, adj.Rows)
	for v, o := range plan.Perm {
		inv[o] = int32(v)
	}
	return permutedRows(adj, plan.Perm, inv, 0, adj.Rows)
}

// TestPreparedStreamingMatchesInMemory: partitioning a prepared file (its coarse levels spilled,
// its adjacency released and read again) gives the plan and the files of partitioning the same
// dataset in memory; a corrupted file leaves nothing behind.
func TestPreparedStreamingMatchesInMemory(t *testing.T) {
	defer func(old int64) { spillAbove = old }(spillAbove)
	spillAbove = 1000
	d := rmat(t, 300, 3000, 6)
	src := filepath.Join(t.TempDir(), "g.dorylus")
	if err := graph.WritePreparedFile(src, d); err != nil {
		t.Fatal(err)
	}
	c := cora(t)
	csrc := filepath.Join(t.TempDir(), "cora.dorylus")
	if err := graph.WritePreparedFile(csrc, c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d   *graph.Dataset
		src string
	}{{d, src}, {c, csrc}} {
		streamed, mem := t.TempDir(), t.TempDir()
		plan, q, err := WritePrepared(tc.src, 3, streamed)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Default(tc.d.Adj, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(plan.Bounds, want.Bounds) || !slices.Equal(plan.Perm, want.Perm) {
			t.Errorf("%s: the streamed plan differs from the in-memory one", tc.d.Name)
		}
		q2, err := WriteDataset(tc.d, plan, mem)
		if err != nil {
			t.Fatal(err)
		}
		if q != q2 || q != Measure(tc.d.Adj, plan) {
			t.Errorf("qualities differ: streamed %v, in memory %v, measured %v", q, q2, Measure(tc.d.Adj, plan))
		}
		for p := range 3 {
			name := graph.PartitionFileName(p, 3)
			a, _ := os.ReadFile(filepath.Join(streamed, name))
			b, _ := os.ReadFile(filepath.Join(mem, name))
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Fatalf("%s: streamed and in-memory partition files differ", name)
			}
		}
	}
	// A flipped byte in the adjacency is caught and leaves no partition files behind.
	raw, _ := os.ReadFile(src)
	raw[len(raw)/2] ^= 0x40
	bad := filepath.Join(t.TempDir(), "bad.dorylus")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, _, err := WritePrepared(bad, 2, out); err == nil {
		t.Fatal("a corrupted file was partitioned")
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Errorf("corrupt input left %d files", len(left))
	}
}

func TestPartitionFileRefusals(t *testing.T) {
	d := cora(t)
	plan, _ := Contiguous(d.Adj.RowPtr, 2)
	dir := t.TempDir()
	if _, err := WriteDataset(d, plan, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := graph.ReadPartitionFile(filepath.Join(dir, graph.PartitionFileName(1, 2)), 0, 2); err == nil {
		t.Error("partition 1's file accepted as partition 0")
	}
	if _, err := graph.ReadPrepared(filepath.Join(dir, graph.PartitionFileName(0, 2))); err == nil {
		t.Error("the whole-graph reader accepted a partition file")
	}
	path := filepath.Join(dir, graph.PartitionFileName(0, 2))
	raw, _ := os.ReadFile(path)
	for _, off := range []int{26, 100, len(raw) - 10} {
		b := slices.Clone(raw)
		b[off] ^= 1
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := graph.ReadPartitionFile(dir, 0, 2); err == nil {
			t.Errorf("flipped byte %d accepted", off)
		}
	}
	if _, err := Contiguous(d.Adj.RowPtr, d.NumNodes()+1); err == nil {
		t.Error("more parts than vertices accepted")
	}
	// A neighbour missing from the ghosts (the first, the middle or the last one) is refused.
	part, err := DatasetPart(d, plan, 1)
	if err != nil || part.Validate() != nil {
		t.Fatalf("part 1: %v, %v", err, part.Validate())
	}
	for _, i := range []int{0, len(part.GhostIDs) / 2, len(part.GhostIDs) - 1} {
		q := *part
		q.GhostIDs, q.GhostDegree, q.GhostOrigIDs = slices.Delete(slices.Clone(q.GhostIDs), i, i+1),
			slices.Delete(slices.Clone(q.GhostDegree), i, i+1), slices.Delete(slices.Clone(q.GhostOrigIDs), i, i+1)
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("neighbour %d, which is not a ghost", part.GhostIDs[i])) {
			t.Errorf("ghost %d of %d left out: %v", i, len(part.GhostIDs), err)
		}
	}
}

// TestQuality reports the edge cut and balance of the contiguous and refined plans on PubMed's
// graph and an R-MAT graph, and checks that refinement lowers the cut within the balance bound.
func TestQuality(t *testing.T) {
	t.Setenv(graph.DataDirEnv, filepath.Join("..", "..", "datasets"))
	pubmed, err := graph.Load("pubmed", graph.LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*graph.Dataset{"pubmed": pubmed, "rmat-20k-400k": rmat(t, 20000, 400000, 0)} {
		for _, p := range []int{2, 4, 8} {
			plan, err := Contiguous(d.Adj.RowPtr, p)
			if err != nil {
				t.Fatal(err)
			}
			base := Measure(d.Adj, plan)
			ref, err := Refine(d.Adj, plan, RefineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			better := Measure(d.Adj, ref)
			t.Logf("%s contiguous: %v", name, base)
			t.Logf("%s refined:    %v", name, better)
			if base.Balance > 1.01 {
				t.Errorf("%s: contiguous balance %.4f", name, base.Balance)
			}
			if better.Balance > 1.06 || better.CutRatio > base.CutRatio {
				t.Errorf("%s %d parts: refinement gave cut %.4f (from %.4f), balance %.4f", name, p, better.CutRatio, base.CutRatio, better.Balance)
			}
		}
	}
}

// TestOriginalIDs: every partition file of a renumbering plan names each owned row and ghost
// by its id in the source dataset (Perm), a contiguous plan by its own id, and both writers
// write the same ids (TestPreparedStreamingMatchesInMemory compares their bytes).
func TestOriginalIDs(t *testing.T) {
	d := cora(t)
	for _, m := range []Method{MethodMultilevel, MethodContiguous} {
		plan, err := New(d.Adj, 3, m)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if _, err := WriteDataset(d, plan, dir); err != nil {
			t.Fatal(err)
		}
		renumbered := 0
		for p := range 3 {
			pd, err := graph.ReadPartitionFile(dir, p, 3)
			if err != nil {
				t.Fatal(err)
			}
			ids := pd.LocalOrigIDs()
			global := make([]int32, 0, len(ids))
			for r := range pd.Rows() {
				global = append(global, int32(pd.Lo()+r))
			}
			global = append(global, pd.GhostIDs...)
			for i, v := range global {
				want := v
				if plan.Perm != nil {
					want = plan.Perm[v]
				}
				if ids[i] != want {
					t.Fatalf("%s part %d: local vertex %d (id %d) has original id %d, want %d", m, p, i, v, ids[i], want)
				}
				if want != v {
					renumbered++
				}
			}
		}
		if (renumbered > 0) != (m == MethodMultilevel) {
			t.Errorf("%s: %d vertices renumbered", m, renumbered)
		}
	}
}
