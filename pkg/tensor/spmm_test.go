package tensor

import (
	"math/rand/v2"
	"testing"
)

var spmmShapes = []struct{ rows, cols, bcols int }{
	{0, 0, 0}, {0, 5, 3}, {1, 1, 1}, {1, 7, 128}, {3, 4, 0}, {5, 9, 1}, {17, 13, 7}, {33, 40, 16},
	{64, 50, 17}, {100, 80, 31}, {40, 60, 64}, {70, 90, 100}, {129, 77, 128}, {50, 50, 129},
	{30, 30, 200}, {257, 300, 16}, {500, 400, 128}, {2000, 3000, 48},
}

func TestSpMMAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range spmmShapes {
		for _, pattern := range []bool{false, true} {
			a := randCSR(rng, s.rows, s.cols, 0.1, pattern)
			if err := a.Validate(); err != nil {
				t.Fatal(err)
			}
			b := randDense(rng, s.cols, s.bcols)
			want := naiveSpMM(a, b, 0, a.Rows)
			eachISA(t, func(t testing.TB, isa string) {
				for _, th := range []int{1, 2, 3} {
					withThreads(th, func() {
						got := NewDense(s.rows, s.bcols)
						for i := range got.Data {
							got.Data[i] = 99 // overwritten, not accumulated
						}
						SpMM(got, a, b)
						if err := closeTo(got, want, 1e-4); err != nil {
							t.Errorf("%s threads %d %dx%d·%dx%d pattern=%v: %v", isa, th, s.rows, s.cols, s.cols, s.bcols, pattern, err)
						}
					})
				}
			})
		}
	}
}

func TestSpMMRowsIntervals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a := randCSR(rng, 301, 250, 0.05, false)
	b := randDense(rng, 250, 40)
	full := NewDense(a.Rows, b.Cols)
	SpMM(full, a, b)
	for _, parts := range []int{1, 2, 3, 7, 301} {
		cat := NewDense(a.Rows, b.Cols)
		for p := 0; p < parts; p++ {
			lo, hi := p*a.Rows/parts, (p+1)*a.Rows/parts
			dst := NewDense(hi-lo, b.Cols)
			SpMMRows(dst, a, b, lo, hi)
			copy(cat.Data[lo*b.Cols:], dst.Data)
		}
		if !equalDense(cat, full) {
			t.Errorf("%d intervals: concatenated SpMMRows differs from SpMM", parts)
		}
	}
	// empty interval
	SpMMRows(NewDense(0, b.Cols), a, b, 5, 5)
}

func TestSpMMShapeErrors(t *testing.T) {
	a := randCSR(rand.New(rand.NewPCG(5, 6)), 4, 3, 0.5, false)
	b := NewDense(3, 2)
	if err := CheckSpMM(NewDense(4, 2), a, b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dst *Dense
		b   *Dense
	}{{NewDense(3, 2), b}, {NewDense(4, 3), b}, {NewDense(4, 2), NewDense(2, 2)}, {nil, b}} {
		if err := CheckSpMM(c.dst, a, c.b); err == nil {
			t.Errorf("CheckSpMM accepted dst %v b %v", c.dst, c.b)
		}
	}
	if err := CheckSpMMRows(NewDense(2, 2), a, b, 3, 5); err == nil {
		t.Error("CheckSpMMRows accepted rows past the end")
	}
	defer func() {
		if recover() == nil {
			t.Error("SpMM did not panic on a shape mismatch")
		}
	}()
	SpMM(NewDense(3, 2), a, b)
}

func TestTransposeTwice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][2]int{{0, 0}, {1, 1}, {1, 5}, {5, 1}, {40, 70}, {300, 200}} {
		for _, pattern := range []bool{false, true} {
			a := randCSR(rng, s[0], s[1], 0.1, pattern)
			at := Transpose(a)
			if err := at.Validate(); err != nil {
				t.Fatal(err)
			}
			if at.Rows != a.Cols || at.Cols != a.Rows {
				t.Fatalf("transpose shape %dx%d", at.Rows, at.Cols)
			}
			// (Aᵀ)ᵀ == A exactly
			att := Transpose(at)
			if !att.Equal(a) {
				t.Errorf("%v: transpose twice differs", s)
			}
			// Aᵀ·B against the dense transpose
			b := randDense(rng, a.Rows, 3)
			got := NewDense(a.Cols, 3)
			SpMM(got, at, b)
			want := NewDense(a.Cols, 3)
			ad := denseOf(a)
			want = naiveMatMul(want, ad, true, b, false, 1, 0)
			if err := closeTo(got, want, 1e-5); err != nil {
				t.Errorf("%v: Aᵀ·B: %v", s, err)
			}
		}
	}
}

func denseOf(a *CSR) *Dense {
	d := NewDense(a.Rows, a.Cols)
	for i := 0; i < a.Rows; i++ {
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			v := float32(1)
			if a.Val != nil {
				v = a.Val[k]
			}
			d.Data[i*a.Cols+int(a.ColIdx[k])] = v
		}
	}
	return d
}

func TestSpMMNoAlloc(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	a := randCSR(rng, 3000, 3000, 0.01, false)
	b := randDense(rng, 3000, 64)
	dst := NewDense(3000, 64)
	eachISA(t, func(t testing.TB, isa string) {
		withThreads(2, func() {
			SpMM(dst, a, b)
			if n := testing.AllocsPerRun(20, func() { SpMM(dst, a, b) }); n != 0 {
				t.Errorf("%s: SpMM allocates %v times a call", isa, n)
			}
			d2 := NewDense(1000, 64)
			if n := testing.AllocsPerRun(20, func() { SpMMRows(d2, a, b, 1000, 2000) }); n != 0 {
				t.Errorf("%s: SpMMRows allocates %v times a call", isa, n)
			}
		})
	})
}

func TestPermute(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	a := randCSR(rng, 200, 200, 0.05, false)
	b := randDense(rng, 200, 8)
	want := NewDense(200, 8)
	SpMM(want, a, b)
	for name, perm := range map[string][]int32{"degree": DegreeOrder(a), "rcm": RCMOrder(a)} {
		if err := CheckPermutation(perm, 200); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pa := PermuteCSR(a, perm)
		if err := pa.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pb := NewDense(200, 8)
		PermuteRows(pb, b, perm)
		pc := NewDense(200, 8)
		SpMM(pc, pa, pb)
		got := NewDense(200, 8)
		PermuteRows(got, pc, InversePermutation(perm))
		if err := closeTo(got, want, 1e-5); err != nil {
			t.Errorf("%s: permuted product: %v", name, err)
		}
	}
	deg := DegreeOrder(a)
	for i := 1; i < len(deg); i++ {
		if a.Degree(int(deg[i])) > a.Degree(int(deg[i-1])) {
			t.Fatal("DegreeOrder not by decreasing degree")
		}
	}
}
