package tensor

import (
	"fmt"
	"testing"
)

type gemmShape struct {
	name           string
	m, n, k        int
	transA, transB bool
}

// gemmBenchShapes are the GEMMs of a GCN epoch (hidden 128, 16 classes) on R-MAT graphs of 100k
// and 1M vertices and on Cora (2708 vertices, 1433 features, 7 classes), plus the square 4096².
func gemmBenchShapes() []gemmShape {
	s := []gemmShape{{name: "square4096", m: 4096, n: 4096, k: 4096}}
	for _, n := range []int{100000, 1000000} {
		s = append(s,
			gemmShape{name: fmt.Sprintf("XW_N%dx128x128", n), m: n, n: 128, k: 128},
			gemmShape{name: fmt.Sprintf("dW_128xN%dx128_transA", n), m: 128, n: 128, k: n, transA: true},
			gemmShape{name: fmt.Sprintf("HW2_N%dx128x16", n), m: n, n: 16, k: 128},
			gemmShape{name: fmt.Sprintf("dH_N%dx16x128_transB", n), m: n, n: 128, k: 16, transB: true},
		)
	}
	return append(s,
		gemmShape{name: "cora_XW1_2708x1433x16", m: 2708, n: 16, k: 1433},
		gemmShape{name: "cora_dW1_1433x2708x16_transA", m: 1433, n: 16, k: 2708, transA: true},
		gemmShape{name: "cora_HW2_2708x16x7", m: 2708, n: 7, k: 16},
		gemmShape{name: "cora_dH_2708x7x16_transB", m: 2708, n: 16, k: 7, transB: true},
	)
}

type gemmImpl struct {
	name string
	f    func(dst, a *Dense, transA bool, b *Dense, transB bool, alpha, beta float32)
	isa  int
}

func gemmBenchImpls() []gemmImpl {
	impls := []gemmImpl{{"matmul-" + MatMulImpl(), MatMul, bestISA}}
	for _, i := range isas() {
		if i != isaGo { // without assembly MatMulNative is gonum
			impls = append(impls, gemmImpl{"native-" + isaName(i), MatMulNative, i})
		}
	}
	impls = append(impls, gemmImpl{"gonum", MatMulGonum, bestISA})
	return impls
}

// BenchmarkMatMul reports GFLOP/s (2·m·n·k per call) per shape and implementation on 2 threads.
func BenchmarkMatMul(b *testing.B) {
	defer func() { kernelISA = bestISA }()
	for _, s := range gemmBenchShapes() {
		ar, ac := s.m, s.k
		if s.transA {
			ar, ac = s.k, s.m
		}
		br, bc := s.k, s.n
		if s.transB {
			br, bc = s.n, s.k
		}
		if testing.Short() && int64(ar)*int64(ac) > 1<<24 {
			continue
		}
		for _, im := range gemmBenchImpls() {
			b.Run(s.name+"/"+im.name, func(b *testing.B) {
				a, x, c := denseFor(ar, ac, 1), denseFor(br, bc, 2), denseFor(s.m, s.n, 3)
				kernelISA = im.isa
				defer func() { kernelISA = bestISA }()
				im.f(c, a, s.transA, x, s.transB, 1, 0)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					im.f(c, a, s.transA, x, s.transB, 1, 0)
				}
				sec := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)/sec/1e9, "GFLOP/s")
				b.ReportMetric(sec*1e3, "ms/op")
			})
		}
	}
}
