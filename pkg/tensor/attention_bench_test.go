package tensor

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// The GAT edge kernels on an R-MAT graph with self loops (100k vertices, 2M directed edges by
// default; DORYLUS_BENCH_ATTENTION=NODESxEDGES to change), 8 heads of 8 features as the GAT
// paper's hidden layer. Each reports edges·heads per second.

func attentionBenchGraph(b *testing.B) *CSR {
	n, e := 100000, 2000000
	if s := os.Getenv("DORYLUS_BENCH_ATTENTION"); s != "" {
		if _, err := fmt.Sscanf(s, "%dx%d", &n, &e); err != nil {
			b.Fatal("DORYLUS_BENCH_ATTENTION: ", err)
		}
	}
	return rmatGraph(b, n, e)
}

type attentionBench struct {
	a, at            *CSR
	perm             []int64
	dst, src, dDst   *Dense // vertices × heads
	alpha, grad      *Dense // edges × heads
	x, out           *Dense // vertices × heads·f
	heads, f, n, nnz int
}

func newAttentionBench(b *testing.B, heads, f int) *attentionBench {
	a := attentionBenchGraph(b)
	rng := rand.New(rand.NewPCG(1, 2))
	s := &attentionBench{a: a, heads: heads, f: f, n: a.Rows, nnz: int(a.NNZ())}
	s.at, s.perm = EdgeTranspose(a)
	s.dst, s.src, s.dDst = randDense(rng, s.n, heads), randDense(rng, s.n, heads), NewDense(s.n, heads)
	s.alpha, s.grad = NewDense(s.nnz, heads), randDense(rng, s.nnz, heads)
	EdgeAttention(s.alpha, a, s.dst, s.src, 0.2)
	s.x, s.out = randDense(rng, s.n, heads*f), NewDense(s.n, heads*f)
	return s
}

func (s *attentionBench) report(b *testing.B) {
	b.ReportMetric(float64(s.nnz)*float64(s.heads)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Medge-heads/s")
}

func BenchmarkEdgeAttention(b *testing.B) {
	s := newAttentionBench(b, 8, 8)
	b.ReportAllocs()
	for b.Loop() {
		EdgeAttention(s.alpha, s.a, s.dst, s.src, 0.2)
	}
	s.report(b)
}

func BenchmarkEdgeAttentionBackward(b *testing.B) {
	s := newAttentionBench(b, 8, 8)
	g := s.grad.Clone()
	b.ReportAllocs()
	for b.Loop() {
		copy(g.Data, s.grad.Data)
		EdgeAttentionBackward(g, s.dDst, s.a, s.dst, s.src, 0.2)
	}
	s.report(b)
}

func BenchmarkEdgeSoftmax(b *testing.B) {
	s := newAttentionBench(b, 8, 8)
	b.Run("forward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			EdgeSoftmax(s.grad, s.grad, s.a)
		}
		s.report(b)
	})
	b.Run("backward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			EdgeSoftmaxBackward(s.grad, s.alpha, s.a)
		}
		s.report(b)
	})
}

func BenchmarkEdgeAggregate(b *testing.B) {
	for _, hf := range [][2]int{{8, 8}, {1, 16}} {
		s := newAttentionBench(b, hf[0], hf[1])
		b.Run(fmt.Sprintf("heads=%d/f=%d", hf[0], hf[1]), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				EdgeAggregate(s.out, s.a, s.alpha, nil, s.x)
			}
			s.report(b)
		})
		b.Run(fmt.Sprintf("heads=%d/f=%d/transposed", hf[0], hf[1]), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				EdgeAggregate(s.out, s.at, s.alpha, s.perm, s.x)
			}
			s.report(b)
		})
	}
}

func BenchmarkEdgeDot(b *testing.B) {
	s := newAttentionBench(b, 8, 8)
	b.ReportAllocs()
	for b.Loop() {
		EdgeDot(s.grad, s.a, s.out, s.x)
	}
	s.report(b)
}

func BenchmarkEdgeSum(b *testing.B) {
	s := newAttentionBench(b, 8, 8)
	b.ReportAllocs()
	for b.Loop() {
		EdgeSum(s.dDst, s.at, s.grad, s.perm)
	}
	s.report(b)
}
