package tensor

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

// benchGraphSize is the R-MAT graph of the large SpMM benchmarks: DORYLUS_BENCH_RMAT=NODESxEDGES
// (directed edges, both directions counted), 1000000x20000000 by default.
func benchGraphSize() (int, int) {
	n, e := 1000000, 20000000
	if s := os.Getenv("DORYLUS_BENCH_RMAT"); s != "" {
		if _, err := fmt.Sscanf(s, "%dx%d", &n, &e); err != nil {
			panic("DORYLUS_BENCH_RMAT: " + err.Error())
		}
	}
	return n, e
}

type orderedGraph struct {
	a    *CSR
	perm []int32 // nil for the original order
}

var orderCache sync.Map

// benchGraph returns the benchmark graph in the named order: "none", "degree" or "rcm", or the
// "uniform" graph of the same size with uniformly random columns (gather_rows.c's pattern).
func benchGraph(b *testing.B, order string) *CSR {
	n, e := benchGraphSize()
	key := fmt.Sprint(n, e, order)
	if g, ok := orderCache.Load(key); ok {
		return g.(*orderedGraph).a
	}
	var g orderedGraph
	switch order {
	case "uniform":
		g.a = uniformGraph(n, e/n)
	case "none":
		g.a = rmatGraph(b, n, e)
	case "degree":
		base := rmatGraph(b, n, e)
		g.perm = DegreeOrder(base)
		g.a = PermuteCSR(base, g.perm)
	case "rcm":
		base := rmatGraph(b, n, e)
		g.perm = RCMOrder(base)
		g.a = PermuteCSR(base, g.perm)
	default:
		b.Fatalf("unknown order %q", order)
	}
	orderCache.Store(key, &g)
	return g.a
}

func uniformGraph(n, perRow int) *CSR {
	rng := rand.New(rand.NewPCG(42, 43))
	a := &CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1), ColIdx: make([]int32, 0, n*perRow), Val: make([]float32, 0, n*perRow)}
	row := make([]int32, 0, perRow)
	for i := 0; i < n; i++ {
		row = row[:0]
		for len(row) < perRow {
			row = append(row, int32(rng.IntN(n)))
		}
		sortCompact(&row)
		a.ColIdx = append(a.ColIdx, row...)
		for range row {
			a.Val = append(a.Val, 1/float32(perRow))
		}
		a.RowPtr[i+1] = int64(len(a.ColIdx))
	}
	return a
}

func sortCompact(r *[]int32) {
	s := *r
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	o := 0
	for i, v := range s {
		if i == 0 || v != s[o-1] {
			s[o] = v
			o++
		}
	}
	*r = s[:o]
}

var benchDense sync.Map

func denseFor(rows, cols int, seed uint64) *Dense {
	key := fmt.Sprint(rows, cols, seed)
	if d, ok := benchDense.Load(key); ok {
		return d.(*Dense)
	}
	d := NewDense(rows, cols)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range d.Data {
		d.Data[i] = rng.Float32() - 0.5
	}
	benchDense.Store(key, d)
	return d
}

// BenchmarkSpMMRMAT is the headline Gather benchmark: Â·H on the 1M-vertex, 20M-edge R-MAT graph
// (GCN-normalised, self loops) with 128 and 16 columns, per kernel set, thread count and vertex
// order. rows/s counts gathered rows (nonzeros) per second.
func BenchmarkSpMMRMAT(b *testing.B) {
	if testing.Short() {
		b.Skip("large graph")
	}
	defer func() { kernelISA = bestISA }()
	for _, order := range []string{"none", "degree", "rcm", "uniform"} {
		for _, cols := range []int{128, 16} {
			for _, isa := range isas() {
				for _, th := range []int{2, 1} {
					name := fmt.Sprintf("order=%s/cols=%d/%s/threads=%d", order, cols, isaName(isa), th)
					b.Run(name, func(b *testing.B) {
						a := benchGraph(b, order)
						x := denseFor(a.Cols, cols, 7)
						dst := denseFor(a.Rows, cols, 8)
						kernelISA = isa
						withThreads(th, func() {
							SpMM(dst, a, x)
							b.ResetTimer()
							for i := 0; i < b.N; i++ {
								SpMM(dst, a, x)
							}
							reportSpMM(b, a, cols)
						})
					})
				}
			}
		}
	}
}

func reportSpMM(b *testing.B, a *CSR, cols int) {
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(a.NNZ())/sec/1e6, "Mrows/s")
	b.ReportMetric(float64(a.NNZ())*float64(cols)*4/sec/1e9, "GB/s")
	b.ReportMetric(sec*1e3, "ms/op")
}

// BenchmarkSpMMSmall is SpMM on small random matrices (Cora-sized: 2708 rows, about 4 entries a
// row) where dispatch overhead matters.
func BenchmarkSpMMSmall(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	a := randCSR(rng, 2708, 2708, 4.0/2708, false)
	for _, cols := range []int{16, 128} {
		x := randDense(rng, 2708, cols)
		dst := NewDense(2708, cols)
		b.Run(fmt.Sprintf("cora/cols=%d", cols), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				SpMM(dst, a, x)
			}
			reportSpMM(b, a, cols)
		})
	}
}

// BenchmarkSpMMMixedSlots is a mixed-epoch Gather as a graph server runs it, on the R-MAT
// benchmark graph: the rows of one of 8 intervals, 16 columns, each of 16 sources' rows read from
// one of 4 slots of b (pkg/pipeline's epochs), by moving a copy of the interval's column indices
// into their sources' slots and an SpMM on the copy. "sequential" looks each nonzero's source up
// in an array of the interval's nonzeros, as runtime/graphserver does; "random" looks it up by
// its column, at random; "one-slot" is the plain SpMM with every source in one slot, the bound.
// One thread.
func BenchmarkSpMMMixedSlots(b *testing.B) {
	if testing.Short() {
		b.Skip("large graph")
	}
	const slots, sources, cols = 4, 16, 16
	a := benchGraph(b, "none")
	x, n := denseFor(slots*a.Cols, cols, 7), a.Cols
	lo, hi := 3*a.Rows/8, 4*a.Rows/8
	dst := NewDense(hi-lo, cols)
	p0, p1 := a.RowPtr[lo], a.RowPtr[hi]
	rowSource, nzSource, shift := make([]uint16, n), make([]uint16, p1-p0), make([]int32, sources)
	for c := range rowSource {
		rowSource[c] = uint16(c * sources / n) // sources are ranges of rows
	}
	for k := range nzSource {
		nzSource[k] = rowSource[a.ColIdx[p0+int64(k)]]
	}
	for s := range shift {
		shift[s] = int32(s % slots * n)
	}
	moved := &CSR{Rows: hi - lo, Cols: slots * n, RowPtr: make([]int64, hi-lo+1), ColIdx: make([]int32, p1-p0), Val: a.Val[p0:p1]}
	move := func(byColumn bool) { // the interval's rows of a, from 0, their columns moved
		for i := range moved.RowPtr {
			moved.RowPtr[i] = a.RowPtr[lo+i] - p0
		}
		if byColumn {
			for k, c := range a.ColIdx[p0:p1] {
				moved.ColIdx[k] = c + shift[rowSource[c]]
			}
		} else {
			for k, c := range a.ColIdx[p0:p1] {
				moved.ColIdx[k] = c + shift[nzSource[k]]
			}
		}
	}
	withThreads(1, func() {
		for _, c := range []struct {
			name     string
			byColumn bool
		}{{"sequential", false}, {"random", true}} {
			b.Run(c.name, func(b *testing.B) {
				for b.Loop() {
					move(c.byColumn)
					SpMMRows(dst, moved, x, 0, moved.Rows)
				}
			})
		}
		b.Run("one-slot", func(b *testing.B) {
			for b.Loop() {
				SpMMRows(dst, a, x.RowSlice(0, n), lo, hi)
			}
		})
	})
}

// BenchmarkSpMMTransAdd is the weight gradient of a sparse-feature layer, Xᵀ dP, for one
// interval of Coauthor CS's shape (2292 rows of 6805 bag-of-words features, 60 entries a row
// at random columns, 16 hidden columns), per kernel set, on one thread.
func BenchmarkSpMMTransAdd(b *testing.B) {
	defer func() { kernelISA = bestISA }()
	rng := rand.New(rand.NewPCG(1, 2))
	a := randCSR(rng, 2292, 6805, 60.0/6805, false)
	dp := randDense(rng, 2292, 16)
	dst := NewDense(6805, 16)
	for _, isa := range isas() {
		b.Run(isaName(isa), func(b *testing.B) {
			kernelISA = isa
			withThreads(1, func() {
				for b.Loop() {
					SpMMTransAdd(dst, a, dp)
				}
			})
			b.ReportMetric(float64(a.NNZ())/(b.Elapsed().Seconds()/float64(b.N))/1e6, "Mentries/s")
		})
	}
}
