package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestDropoutMaskIndependentOfSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, cols := range []int{1, 3, 4, 7, 16, 130} {
		x := randDense(rng, 503, cols)
		full := NewDense(503, cols)
		const key = 0xDEADBEEF
		withThreads(2, func() { Dropout(full, x, 0.5, key, 100, nil) })
		for _, parts := range []int{1, 2, 5, 503} {
			for _, th := range []int{1, 3} {
				withThreads(th, func() {
					cat := NewDense(503, cols)
					for p := 0; p < parts; p++ {
						lo, hi := p*503/parts, (p+1)*503/parts
						Dropout(cat.RowSlice(lo, hi), x.RowSlice(lo, hi), 0.5, key, 100+lo, nil)
					}
					if !equalDense(cat, full) {
						t.Fatalf("cols %d, %d intervals, %d threads: mask depends on the split", cols, parts, th)
					}
				})
			}
		}
		// the backward pass applies the same mask and scale
		g := x.Clone()
		DropoutBackward(g, 0.5, key, 100, nil)
		if !equalDense(g, full) {
			t.Fatalf("cols %d: DropoutBackward differs from Dropout", cols)
		}
		// in place equals out of place
		y := x.Clone()
		Dropout(y, y, 0.5, key, 100, nil)
		if !equalDense(y, full) {
			t.Fatal("Dropout in place differs")
		}
		// every element kept or dropped, kept ones scaled by 1/(1-p), matching DropoutKeep
		for r := 0; r < 503; r++ {
			for c := 0; c < cols; c++ {
				got, v := full.Data[r*cols+c], x.Data[r*cols+c]
				keep := DropoutKeep(0.5, key, 100+r, c)
				if (keep && got != 2*v) || (!keep && got != 0) {
					t.Fatalf("element (%d,%d): %g from %g, keep=%v", r, c, got, v, keep)
				}
			}
		}
	}
}

func TestDropoutStatistics(t *testing.T) {
	const rows, cols = 1000, 128
	x := NewDense(rows, cols)
	for i := range x.Data {
		x.Data[i] = 1
	}
	y := NewDense(rows, cols)
	for _, p := range []float32{0.1, 0.5, 0.9} {
		for key := uint64(0); key < 3; key++ {
			Dropout(y, x, p, key, 0, nil)
			kept, both, pairs := 0, 0, 0
			for i, v := range y.Data {
				if v != 0 {
					kept++
					if want := float32(1 / (1 - float64(p))); math.Abs(float64(v-want)) > 1e-3 {
						t.Fatalf("kept element scaled to %g, want %g", v, want)
					}
				}
				// neighbours in the same row (same hash word or not) and in the next row
				if i%cols != cols-1 {
					pairs++
					if v != 0 && y.Data[i+1] != 0 {
						both++
					}
				}
			}
			n := float64(rows * cols)
			q := 1 - float64(p)
			frac := float64(kept) / n
			sigma := math.Sqrt(q * (1 - q) / n)
			if math.Abs(frac-q) > 5*sigma {
				t.Errorf("p=%g key=%d: kept %.4f, want %.4f ± %.4f", p, key, frac, q, sigma)
			}
			pb := float64(both) / float64(pairs)
			if s := math.Sqrt(q * q * (1 - q*q) / float64(pairs)); math.Abs(pb-q*q) > 5*s {
				t.Errorf("p=%g: adjacent pairs kept together %.4f, want %.4f: correlated mask", p, pb, q*q)
			}
		}
	}
	// different keys give different masks; p = 0 copies, p = 1 zeros
	a, b := NewDense(rows, cols), NewDense(rows, cols)
	Dropout(a, x, 0.5, 1, 0, nil)
	Dropout(b, x, 0.5, 2, 0, nil)
	if equalDense(a, b) {
		t.Error("keys 1 and 2 give the same mask")
	}
	Dropout(a, x, 0, 1, 0, nil)
	if !equalDense(a, x) {
		t.Error("p = 0 does not copy")
	}
	Dropout(a, x, 1, 1, 0, nil)
	for _, v := range a.Data {
		if v != 0 {
			t.Fatal("p = 1 keeps something")
		}
	}
}

// TestDropoutCSRMatchesDense checks every kernel set on rows of about 10 and 40 entries (the
// vector kernel's tails and whole steps), with values and as a pattern matrix.
func TestDropoutCSRMatchesDense(t *testing.T) {
	eachISA(t, func(t testing.TB, isa string) {
		for _, cols := range []int{50, 200} {
			checkDropoutCSR(t, isa, cols)
		}
	})
}

func checkDropoutCSR(t testing.TB, isa string, cols int) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, pattern := range []bool{false, true} {
		a := randCSR(rng, 300, cols, 0.2, pattern)
		dense := denseOf(a)
		want := NewDense(300, cols)
		Dropout(want, dense, 0.3, 7, 1000, nil)
		var d CSR
		DropoutCSR(&d, a, 0.3, 7, 1000, nil)
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		if &d.ColIdx[0] != &a.ColIdx[0] {
			t.Error("DropoutCSR does not share the structure")
		}
		if !equalDense(denseOf(&d), want) {
			t.Errorf("%s, %d columns, pattern=%v: DropoutCSR differs from dense Dropout on the same entries", isa, cols, pattern)
		}
		// intervals of rows with their offsets give the same values
		for lo := 0; lo < 300; lo += 77 {
			hi := min(lo+77, 300)
			sub := &CSR{Rows: hi - lo, Cols: cols, RowPtr: make([]int64, hi-lo+1)}
			base := a.RowPtr[lo]
			for i := lo; i <= hi; i++ {
				sub.RowPtr[i-lo] = a.RowPtr[i] - base
			}
			sub.ColIdx = a.ColIdx[base:a.RowPtr[hi]]
			if a.Val != nil {
				sub.Val = a.Val[base:a.RowPtr[hi]]
			}
			var ds CSR
			DropoutCSR(&ds, sub, 0.3, 7, 1000+lo, nil)
			for k := range ds.Val {
				if ds.Val[k] != d.Val[int(base)+k] {
					t.Fatalf("interval [%d,%d): entry %d differs", lo, hi, k)
				}
			}
		}
		// p = 0 copies (ones for a pattern matrix)
		DropoutCSR(&d, a, 0, 7, 0, nil)
		if !equalDense(denseOf(&d), dense) {
			t.Error("DropoutCSR with p = 0 does not copy")
		}
	}
}

func TestDropoutNoAlloc(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	x, y := randDense(rng, 3000, 128), NewDense(3000, 128)
	a := randCSR(rng, 2000, 500, 0.05, false)
	var d CSR
	DropoutCSR(&d, a, 0.5, 1, 0, nil)
	withThreads(2, func() {
		for name, f := range map[string]func(){
			"Dropout":         func() { Dropout(y, x, 0.5, 9, 0, nil) },
			"DropoutBackward": func() { DropoutBackward(y, 0.5, 9, 0, nil) },
			"DropoutCSR":      func() { DropoutCSR(&d, a, 0.5, 9, 0, nil) },
		} {
			f()
			if n := testing.AllocsPerRun(20, f); n != 0 {
				t.Errorf("%s allocates %v times a call", name, n)
			}
		}
	})
}

// TestDropoutEdgesKeyedByEndPoints checks that an edge's mask is that of element (dst,
// src·heads+h) of a dense dropout, whatever the block's column numbering and entry order.
func TestDropoutEdgesKeyedByEndPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, cols, heads = 120, 90, 3
	a := randCSR(rng, rows, cols, 0.1, true)
	vals := NewDense(int(a.NNZ()), heads)
	for i := range vals.Data {
		vals.Data[i] = rng.Float32() + 0.5
	}
	ones := NewDense(rows, cols*heads)
	for i := range ones.Data {
		ones.Data[i] = 1
	}
	mask := NewDense(rows, cols*heads)
	Dropout(mask, ones, 0.4, 11, 500, nil)
	got := vals.Clone()
	DropoutEdges(got, a, nil, 0.4, 11, 500, nil)
	for i := range rows {
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			for h := range heads {
				e := int(k)*heads + h
				want := vals.Data[e] * mask.Data[i*cols*heads+int(a.ColIdx[k])*heads+h]
				if got.Data[e] != want {
					t.Fatalf("entry %d head %d: %g, want %g", k, h, got.Data[e], want)
				}
			}
		}
	}
	// The same edges with the columns renumbered in reverse and the colIDs naming the original
	// ids get the same mask.
	perm := make([]int32, cols)
	for c := range perm {
		perm[c] = int32(cols - 1 - c)
	}
	b := &CSR{Rows: rows, Cols: cols, RowPtr: a.RowPtr, ColIdx: make([]int32, len(a.ColIdx))}
	for k, c := range a.ColIdx {
		b.ColIdx[k] = int32(cols - 1 - int(c))
	}
	again := vals.Clone()
	DropoutEdges(again, b, perm, 0.4, 11, 500, nil)
	if !equalDense(again, got) {
		t.Error("renumbered columns with their ids give another mask")
	}
	// p = 0 leaves the values alone.
	same := vals.Clone()
	DropoutEdges(same, a, nil, 0, 11, 500, nil)
	if !equalDense(same, vals) {
		t.Error("p = 0 changed the values")
	}
}

// TestDropoutRowIDs: a block whose rows are another block's in another order, named by their
// ids there, draws the same mask for every row — dense, CSR and edge dropout alike.
func TestDropoutRowIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	const rows, cols = 97, 13
	perm := rng.Perm(rows)
	ids := make([]int32, rows) // row r of the shuffled block is row ids[r]-200 of the original
	for r, o := range perm {
		ids[r] = int32(200 + o)
	}
	shuffle := func(x *Dense) *Dense {
		y := NewDense(rows, x.Cols)
		for r, o := range perm {
			copy(y.Row(r), x.Row(o))
		}
		return y
	}
	x := randDense(rng, rows, cols)
	want := NewDense(rows, cols)
	Dropout(want, x, 0.4, 3, 200, nil)
	got := NewDense(rows, cols)
	Dropout(got, shuffle(x), 0.4, 3, 0, ids)
	if !equalDense(got, shuffle(want)) {
		t.Error("Dropout: the shuffled rows with their ids draw other masks")
	}
	a := randCSR(rng, rows, cols, 0.3, false)
	var d CSR
	DropoutCSR(&d, a, 0.4, 3, 200, nil)
	b := &CSR{Rows: rows, Cols: cols, RowPtr: make([]int64, rows+1)}
	for r, o := range perm {
		lo, hi := a.RowPtr[o], a.RowPtr[o+1]
		b.ColIdx = append(b.ColIdx, a.ColIdx[lo:hi]...)
		b.Val = append(b.Val, a.Val[lo:hi]...)
		b.RowPtr[r+1] = int64(len(b.ColIdx))
	}
	var e CSR
	DropoutCSR(&e, b, 0.4, 3, 0, ids)
	if !equalDense(denseOf(&e), shuffle(denseOf(&d))) {
		t.Error("DropoutCSR: the shuffled rows with their ids draw other masks")
	}
	ones := func(n int) *Dense {
		v := NewDense(n, 2)
		for i := range v.Data {
			v.Data[i] = 1
		}
		return v
	}
	ea, eb := ones(int(a.NNZ())), ones(int(b.NNZ()))
	DropoutEdges(ea, a, nil, 0.4, 3, 200, nil)
	DropoutEdges(eb, b, nil, 0.4, 3, 0, ids)
	for r, o := range perm {
		x, y := ea.Data[2*a.RowPtr[o]:2*a.RowPtr[o+1]], eb.Data[2*b.RowPtr[r]:2*b.RowPtr[r+1]]
		if !slices.Equal(x, y) {
			t.Fatalf("DropoutEdges: row %d (originally %d) draws another mask", r, o)
		}
	}
}
