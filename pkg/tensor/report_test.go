package tensor

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The report tests compare variants of a kernel interleaved, round after round in one process, and
// print the best and median of each: on a shared machine whose load changes by the minute this
// ranks variants far more reliably than separate go test -bench runs. They are skipped unless
// DORYLUS_TENSOR_REPORT is set:
//
//	DORYLUS_TENSOR_REPORT=1 go test -run Report -v -timeout 60m ./pkg/tensor
//	DORYLUS_TENSOR_REPORT=1 DORYLUS_TENSOR_REPORT_OPENBLAS=1 OPENBLAS_CORETYPE=Cooperlake \
//	    go test -tags openblas -run ReportGEMM -v ./pkg/tensor
//
// DORYLUS_TENSOR_REPORT_GONUM=1 adds gonum's blas32 to the GEMM report (slow: one round).

type variant struct {
	name string
	f    func()
	ts   []float64
}

func runInterleaved(t *testing.T, group string, rounds int, work float64, unit string, vs []*variant) {
	for _, v := range vs {
		v.f()
	}
	for r := 0; r < rounds; r++ {
		for _, v := range vs {
			t0 := time.Now()
			v.f()
			v.ts = append(v.ts, time.Since(t0).Seconds())
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	for _, v := range vs {
		best, med := minMed(v.ts)
		fmt.Printf("%-10s %-44s best %8.1f  median %8.1f %s  (%.1f / %.1f ms)  load %s\n", group, v.name, work/best, work/med, unit, best*1e3, med*1e3, strings.Fields(string(load))[0])
	}
}

func withISA(isa int, f func()) func() {
	return func() { kernelISA = isa; f(); kernelISA = bestISA }
}

func TestReportSpMM(t *testing.T) {
	if os.Getenv("DORYLUS_TENSOR_REPORT") == "" {
		t.Skip()
	}
	base := rmatGraph(t, 1000000, 20000000)
	t0 := time.Now()
	degPerm := DegreeOrder(base)
	tDeg := time.Since(t0)
	t0 = time.Now()
	rcmPerm := RCMOrder(base)
	tRcm := time.Since(t0)
	t0 = time.Now()
	deg := PermuteCSR(base, degPerm)
	tPerm := time.Since(t0)
	rcm := PermuteCSR(base, rcmPerm)
	uni := uniformGraph(1000000, 21)
	fmt.Printf("prep: DegreeOrder %v RCMOrder %v PermuteCSR %v nnz %d uniform nnz %d\n", tDeg, tRcm, tPerm, base.NNZ(), uni.NNZ())
	for _, cols := range []int{128, 16} {
		x, dst := NewDense(1000000, cols), NewDense(1000000, cols)
		xs := &Dense{Rows: 1000000, Cols: cols, Data: make([]float32, 1000000*cols)} // no huge pages
		for i := range x.Data {
			x.Data[i] = float32(i%7) - 3
			xs.Data[i] = x.Data[i]
		}
		mk := func(name string, a *CSR, b *Dense, isa, th int) *variant {
			return &variant{name: fmt.Sprintf("cols=%d %s", cols, name), f: withISA(isa, func() { withThreads(th, func() { SpMM(dst, a, b) }) })}
		}
		vs := []*variant{
			mk("rmat none avx512 2T", base, x, isaAVX512, 2),
			mk("rmat degree avx512 2T", deg, x, isaAVX512, 2),
			mk("rmat rcm avx512 2T", rcm, x, isaAVX512, 2),
			mk("rmat none avx512 2T 4K pages", base, xs, isaAVX512, 2),
			mk("rmat none avx512 1T", base, x, isaAVX512, 1),
			mk("rmat none avx2 2T", base, x, isaAVX2, 2),
			mk("rmat none go 2T", base, x, isaGo, 2),
			mk("rmat degree go 2T", deg, x, isaGo, 2),
			mk("uniform avx512 2T", uni, x, isaAVX512, 2),
			mk("uniform avx512 2T 4K pages", uni, xs, isaAVX512, 2),
		}
		runInterleaved(t, "spmm", 5, float64(base.NNZ())/1e6, "Mrows/s", vs)
	}
}

func TestReportGEMM(t *testing.T) {
	if os.Getenv("DORYLUS_TENSOR_REPORT") == "" {
		t.Skip()
	}
	withThreads(2, func() {
		for _, s := range gemmBenchShapes() {
			ar, ac := s.m, s.k
			if s.transA {
				ar, ac = s.k, s.m
			}
			br, bc := s.k, s.n
			if s.transB {
				br, bc = s.n, s.k
			}
			a, x, c := denseFor(ar, ac, 1), denseFor(br, bc, 2), denseFor(s.m, s.n, 3)
			var vs []*variant
			for _, im := range gemmBenchImpls()[1:] {
				im := im
				if im.name == "gonum" && os.Getenv("DORYLUS_TENSOR_REPORT_GONUM") == "" {
					continue
				}
				if os.Getenv("DORYLUS_TENSOR_REPORT_OPENBLAS") != "" && im.name != "native-avx512" {
					continue
				}
				vs = append(vs, &variant{name: s.name + " " + im.name, f: withISA(im.isa, func() { im.f(c, a, s.transA, x, s.transB, 1, 0) })})
			}
			if MatMulImpl()[:3] == "ope" {
				vs = append(vs, &variant{name: s.name + " " + MatMulImpl(), f: func() { MatMul(c, a, s.transA, x, s.transB, 1, 0) }})
			}
			rounds := 5
			if os.Getenv("DORYLUS_TENSOR_REPORT_GONUM") != "" {
				rounds = 1
			}
			runInterleaved(t, "gemm", rounds, 2*float64(s.m)*float64(s.n)*float64(s.k)/1e9, "GFLOP/s", vs)
		}
	})
}

func TestReportElem(t *testing.T) {
	if os.Getenv("DORYLUS_TENSOR_REPORT") == "" {
		t.Skip()
	}
	n := 1000000
	x, y := NewDense(n, 128), NewDense(n, 128)
	for i := range x.Data {
		x.Data[i] = float32(i%7) - 3
	}
	sums := make([]float32, 128)
	withThreads(2, func() {
		vs := []*variant{
			{name: "Dropout 1Mx128 avx512", f: func() { Dropout(y, x, 0.5, 3, 0, nil) }},
			{name: "Dropout 1Mx128 go", f: withISA(isaGo, func() { Dropout(y, x, 0.5, 3, 0, nil) })},
			{name: "DropoutBackward 1Mx128 in place", f: func() { DropoutBackward(y, 0.5, 3, 0, nil) }},
			{name: "ReLU 1Mx128", f: func() { ReLU(y, x) }},
			{name: "ReLUBackward 1Mx128", f: func() { ReLUBackward(y, x) }},
			{name: "AddInPlace 1Mx128", f: func() { AddInPlace(y, x) }},
			{name: "ColSums 1Mx128", f: func() { ColSums(sums, x) }},
			{name: "Copy 1Mx128", f: func() { Copy(y, x) }},
		}
		runInterleaved(t, "elem", 5, 1, "op/s", vs)
	})
}

func minMed(x []float64) (float64, float64) {
	y := append([]float64(nil), x...)
	for i := range y {
		for j := i + 1; j < len(y); j++ {
			if y[j] < y[i] {
				y[i], y[j] = y[j], y[i]
			}
		}
	}
	return y[0], y[len(y)/2]
}
