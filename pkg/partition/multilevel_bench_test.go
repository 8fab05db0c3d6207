package partition

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// BenchmarkMultilevel times Multilevel on Coauthor CS and an R-MAT graph of 10⁵ vertices and
// 2·10⁶ adjacency entries, and reports the fraction of entries cut and the balance.
func BenchmarkMultilevel(b *testing.B) {
	b.Setenv(graph.DataDirEnv, filepath.Join("..", "..", "datasets"))
	cs, err := graph.Load("coauthor_cs", graph.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		adj  *tensor.CSR
	}{{"coauthor_cs", cs.Adj}, {"rmat-100k-2M", rmat(b, 100000, 2000000, 0).Adj}} {
		for _, k := range []int{2, 8} {
			b.Run(fmt.Sprintf("%s/k=%d", tc.name, k), func(b *testing.B) {
				var plan Plan
				for b.Loop() {
					if plan, err = Multilevel(tc.adj, k, Options{Seed: 1}); err != nil {
						b.Fatal(err)
					}
				}
				q := Measure(tc.adj, plan)
				b.ReportMetric(q.CutRatio, "cut")
				b.ReportMetric(q.Balance, "balance")
				b.ReportMetric(float64(tc.adj.NNZ())*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}
