package partition

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/testenv"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition/metis"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// skewedRMAT returns an R-MAT graph of 2^scale vertices and about m undirected edges drawn with
// quadrant probabilities (a, b, c, 1-a-b-c), self loops and repeats dropped, vertices numbered
// at random: other skews than graph.RMAT's fixed (0.57, 0.19, 0.19).
func skewedRMAT(scale, m int, a, b, c float64, seed uint64) *tensor.CSR {
	rng := rand.New(rand.NewPCG(seed, 2))
	n := 1 << scale
	seen := make(map[[2]int32]bool, m)
	edges := make([][2]int32, 0, m)
	for range 4 * m {
		if len(edges) == m {
			break
		}
		var u, v int32
		for range scale {
			u, v = 2*u, 2*v
			switch x := rng.Float64(); {
			case x < a:
			case x < a+b:
				v++
			case x < a+b+c:
				u++
			default:
				u, v = u+1, v+1
			}
		}
		if u == v {
			continue
		}
		e := [2]int32{min(u, v), max(u, v)}
		if !seen[e] {
			seen[e] = true
			edges = append(edges, e)
		}
	}
	return permutedCSR(n, edges, seed)
}

// grid returns the w×h grid, each vertex joined to its 4 neighbours, vertices numbered at random.
func grid(w, h int, seed uint64) *tensor.CSR {
	var edges [][2]int32
	for y := range h {
		for x := range w {
			v := int32(y*w + x)
			if x+1 < w {
				edges = append(edges, [2]int32{v, v + 1})
			}
			if y+1 < h {
				edges = append(edges, [2]int32{v, v + int32(w)})
			}
		}
	}
	return permutedCSR(w*h, edges, seed)
}

// randomRegular returns a random d-regular graph of n vertices by the pairing model: the
// vertices' d stubs each are shuffled and paired, and the few self loops and repeated pairs
// dropped (so a handful of vertices have degree below d).
func randomRegular(n, d int, seed uint64) *tensor.CSR {
	rng := rand.New(rand.NewPCG(seed, 3))
	stubs := make([]int32, n*d)
	for i := range stubs {
		stubs[i] = int32(i / d)
	}
	rng.Shuffle(len(stubs), func(i, j int) { stubs[i], stubs[j] = stubs[j], stubs[i] })
	seen := make(map[[2]int32]bool, len(stubs)/2)
	var edges [][2]int32
	for i := 0; i+1 < len(stubs); i += 2 {
		u, v := stubs[i], stubs[i+1]
		e := [2]int32{min(u, v), max(u, v)}
		if u != v && !seen[e] {
			seen[e] = true
			edges = append(edges, e)
		}
	}
	return symmetricCSR(n, edges)
}

// permuted returns adj with its vertices renumbered at random.
func permuted(adj *tensor.CSR, seed uint64) *tensor.CSR {
	var edges [][2]int32
	for u := range adj.Rows {
		for _, v := range adj.ColIdx[adj.RowPtr[u]:adj.RowPtr[u+1]] {
			if int32(u) < v {
				edges = append(edges, [2]int32{int32(u), v})
			}
		}
	}
	return permutedCSR(adj.Rows, edges, seed)
}

// permutedCSR returns the symmetric adjacency of the undirected edges with vertex v renamed to
// a random permutation's π(v).
func permutedCSR(n int, edges [][2]int32, seed uint64) *tensor.CSR {
	pi := rand.New(rand.NewPCG(seed, 4)).Perm(n)
	for i, e := range edges {
		edges[i] = [2]int32{int32(pi[e[0]]), int32(pi[e[1]])}
	}
	return symmetricCSR(n, edges)
}

// metisGraphs are graphs of other shapes than the shipped ones (and the shipped ones under
// another numbering) on which the multilevel cut is held against METIS's.
func metisGraphs(t testing.TB) []struct {
	name string
	adj  *tensor.CSR
} {
	t.Setenv(graph.DataDirEnv, filepath.Join("..", "..", "datasets"))
	graphs := []struct {
		name string
		adj  *tensor.CSR
	}{
		{"rmat-mild(0.45,0.15,0.15)", skewedRMAT(15, 160000, 0.45, 0.15, 0.15, 1)},
		{"rmat-steep(0.65,0.10,0.10)", skewedRMAT(15, 160000, 0.65, 0.10, 0.10, 2)},
		{"rmat-lopsided(0.55,0.25,0.05)", skewedRMAT(15, 160000, 0.55, 0.25, 0.05, 3)},
		{"grid-200x150", grid(200, 150, 4)},
		{"regular-20k-d6", randomRegular(20000, 6, 5)},
	}
	for _, name := range []string{"cora", "citeseer", "pubmed", "amazon_computers", "coauthor_cs"} {
		d, err := graph.Load(name, graph.LoadOptions{AllowMissingFeatures: true})
		if err != nil {
			t.Fatal(err)
		}
		graphs = append(graphs, struct {
			name string
			adj  *tensor.CSR
		}{name + "-permuted", permuted(d.Adj, 6)})
	}
	return graphs
}

// gpmetis returns the path of METIS's gpmetis; without it the test fails (hack/test-deps.sh
// installs Debian's metis).
func gpmetis(t *testing.T) string {
	path, err := exec.LookPath("gpmetis")
	if err != nil {
		testenv.Missing(t, "gpmetis not on PATH (Debian package metis)")
	}
	return path
}

// TestMultilevelAgainstMETIS: on R-MAT graphs of three other skews, a 2-D grid, a random
// regular graph and the shipped graphs with their vertices renumbered at random, the default
// partitioner's cut at 2, 4 and 8 parts is within 1.25× of the cut gpmetis makes of the same
// graph at the same balance (vertex weights 1 + degree, at most 5% above the mean:
// -ufactor=50), and within that balance itself.
func TestMultilevelAgainstMETIS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gpmetis: a child process, which -short's tests do not start")
	}
	bin := gpmetis(t)
	dir := t.TempDir()
	for _, g := range metisGraphs(t) {
		path := filepath.Join(dir, "graph")
		if err := metis.WriteGraph(path, g.adj); err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{2, 4, 8} {
			t.Run(fmt.Sprintf("%s/k=%d", g.name, k), func(t *testing.T) {
				owner, err := metis.Run(bin, path, g.adj.Rows, k, 50)
				if err != nil {
					t.Fatal(err)
				}
				mplan, err := FromOwners(owner, k)
				if err != nil {
					t.Fatal(err)
				}
				plan, err := Default(g.adj, k)
				if err != nil {
					t.Fatal(err)
				}
				ours, theirs := Measure(g.adj, plan), Measure(g.adj, mplan)
				ratio := float64(ours.Cut) / float64(theirs.Cut)
				t.Logf("%s\t%d\t%d\t%d\t%.3f\t%.4f\t%.4f", g.name, k, ours.Cut, theirs.Cut, ratio, ours.Balance, theirs.Balance)
				if ratio > 1.25 || ours.Balance > 1.05 {
					t.Errorf("cut %d (%v), METIS %d (balance %.4f): %.3f× METIS's, want ≤ 1.25 at balance ≤ 1.05", ours.Cut, ours, theirs.Cut, theirs.Balance, ratio)
				}
			})
		}
	}
}
