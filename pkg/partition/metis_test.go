package partition

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/testenv"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition/metis"
	"github.com/dorylus-gnn/dorylus/pkg/partition/shapes"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// namedGraph is a graph and the name a test reports it by.
type namedGraph struct {
	name string
	adj  *tensor.CSR
}

// metisGraphs are graphs of other shapes than the shipped ones (and the shipped ones under
// another numbering) on which the multilevel cut is held against METIS's.
func metisGraphs(t testing.TB) []namedGraph {
	t.Setenv(graph.DataDirEnv, filepath.Join("..", "..", "datasets"))
	graphs := []namedGraph{
		{"rmat-mild(0.45,0.15,0.15)", shapes.RMAT(15, 160000, 0.45, 0.15, 0.15, 1)},
		{"rmat-steep(0.65,0.10,0.10)", shapes.RMAT(15, 160000, 0.65, 0.10, 0.10, 2)},
		{"rmat-lopsided(0.55,0.25,0.05)", shapes.RMAT(15, 160000, 0.55, 0.25, 0.05, 3)},
		{"grid-200x150", shapes.Grid(200, 150, 4)},
		{"regular-20k-d6", shapes.Regular(20000, 6, 5)},
	}
	for _, name := range []string{"cora", "citeseer", "pubmed", "amazon_computers", "coauthor_cs"} {
		d, err := graph.Load(name, graph.LoadOptions{AllowMissingFeatures: true})
		if err != nil {
			t.Fatal(err)
		}
		graphs = append(graphs, namedGraph{name + "-permuted", shapes.Permuted(d.Adj, 6)})
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
				owner, _, err := metis.Run(bin, path, g.adj.Rows, k, 50)
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
