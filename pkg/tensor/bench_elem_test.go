package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// elementwise benchmarks on the 1M×128 activations of the R-MAT 1M GCN (and 100k×128 under -short)
func benchRows() int {
	if testing.Short() {
		return 100000
	}
	return 1000000
}

func reportBytes(b *testing.B, bytes float64) {
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(sec*1e3, "ms/op")
}

func BenchmarkDropout(b *testing.B) {
	n := benchRows()
	x, y := denseFor(n, 128, 11), NewDense(n, 128)
	for _, th := range []int{2, 1} {
		withThreads(th, func() {
			b.Run(fmt.Sprintf("%dx128/threads=%d", n, th), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					Dropout(y, x, 0.5, uint64(i), 0, nil)
				}
				reportBytes(b, float64(n*128*8))
			})
			b.Run(fmt.Sprintf("backward-inplace/%dx128/threads=%d", n, th), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					DropoutBackward(y, 0.5, 1, 0, nil)
				}
				reportBytes(b, float64(n*128*8))
			})
		})
	}
}

// BenchmarkDropoutCSR is the dropout of sparse bag-of-words features, per kernel set, on one
// thread.
func BenchmarkDropoutCSR(b *testing.B) {
	defer func() { kernelISA = bestISA }()
	rng := rand.New(rand.NewPCG(1, 2))
	a := randCSR(rng, 20000, 3000, 0.01, false)
	var d CSR
	DropoutCSR(&d, a, 0.5, 0, 0, nil)
	for _, isa := range isas() {
		b.Run(isaName(isa), func(b *testing.B) {
			kernelISA = isa
			b.ReportAllocs()
			withThreads(1, func() {
				for i := 0; b.Loop(); i++ {
					DropoutCSR(&d, a, 0.5, uint64(i), 0, nil)
				}
			})
			b.ReportMetric(float64(a.NNZ())/(b.Elapsed().Seconds()/float64(b.N))/1e6, "Mentries/s")
		})
	}
}

func BenchmarkReLU(b *testing.B) {
	n := benchRows()
	x, y := denseFor(n, 128, 11), NewDense(n, 128)
	b.Run("forward", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ReLU(y, x)
		}
		reportBytes(b, float64(n*128*8))
	})
	b.Run("backward", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ReLUBackward(y, x)
		}
		reportBytes(b, float64(n*128*12))
	})
}

func BenchmarkAddColSums(b *testing.B) {
	n := benchRows()
	x, y := denseFor(n, 128, 11), NewDense(n, 128)
	sums := make([]float32, 128)
	b.Run("AddInPlace", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			AddInPlace(y, x)
		}
		reportBytes(b, float64(n*128*12))
	})
	b.Run("ColSums", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ColSums(sums, x)
		}
		reportBytes(b, float64(n*128*4))
	})
}

func BenchmarkSoftmaxCrossEntropy(b *testing.B) {
	n := benchRows()
	rng := rand.New(rand.NewPCG(3, 4))
	logits := randDense(rng, n, 16)
	labels, _ := randLabels(rng, n, 16)
	rows := make([]int32, 0, n/10)
	for i := 0; i < n; i += 10 {
		rows = append(rows, int32(i))
	}
	grad := NewDense(n, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		SoftmaxCrossEntropy(logits, labels, rows, grad)
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(len(rows))/sec/1e6, "Mrows/s")
	b.ReportMetric(sec*1e3, "ms/op")
}

// BenchmarkGraphPrep times the one-off graph transformations on the R-MAT benchmark graph.
func BenchmarkGraphPrep(b *testing.B) {
	if testing.Short() {
		b.Skip("large graph")
	}
	n, e := benchGraphSize()
	a := rmatGraph(b, n, e)
	b.Run("Transpose", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Transpose(a)
		}
	})
	b.Run("DegreeOrder", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			DegreeOrder(a)
		}
	})
	b.Run("RCMOrder", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			RCMOrder(a)
		}
	})
	perm := DegreeOrder(a)
	b.Run("PermuteCSR", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			PermuteCSR(a, perm)
		}
	})
}

// BenchmarkAdamStep: one Adam step of Coauthor CS's first GCN layer (6805 features × 16), what a
// parameter server applies for every interval's push, by AdamStep (the kernel) and by its
// portable twin on one thread.
func BenchmarkAdamStep(b *testing.B) {
	w, g, m, v := denseFor(6805, 16, 1), denseFor(6805, 16, 2), denseFor(6805, 16, 3), denseFor(6805, 16, 4)
	a := Adam{Decay: 5e-4, Beta1: 0.9, Beta2: 0.999, Step: 0.01, SqrtC2: 0.03, Eps: 1e-8}
	c := a.coeffs()
	withThreads(1, func() {
		b.Run("AdamStep", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				AdamStep(w, g, m, v, a)
			}
			reportBytes(b, float64(len(w.Data)*4*6))
		})
		b.Run("portable", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				adamGo(w.Data, g.Data, m.Data, v.Data, &c)
			}
			reportBytes(b, float64(len(w.Data)*4*6))
		})
	})
}
