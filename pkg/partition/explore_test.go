package partition

import (
	"os"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

func TestExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	for _, name := range []string{"pubmed", "coauthor_cs", "amazon_computers"} {
		d, err := graph.Load("../../datasets/"+name, graph.LoadOptions{AllowMissingFeatures: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{2, 4, 8} {
			st := time.Now()
			plan, err := Multilevel(d.Adj, k, Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s k=%d %v  %v", name, k, Measure(d.Adj, plan), time.Since(st))
		}
	}
}

func TestExploreRMAT(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	d, err := graph.RMAT(graph.RMATParams{Nodes: 1000000, Edges: 20000000, Classes: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	traceLevel = func(n int, m int64) { t.Logf("level n=%d m=%d", n, m) }
	for _, k := range []int{8} {
		st := time.Now()
		plan, err := Multilevel(d.Adj, k, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rmat k=%d %v  %v", k, Measure(d.Adj, plan), time.Since(st))
		traceLevel = nil
	}
}
