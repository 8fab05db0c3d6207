package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

var gemmShapes = [][3]int{ // m, n, k
	{0, 0, 0}, {1, 1, 1}, {1, 5, 0}, {3, 0, 4}, {0, 3, 4}, {1, 1, 300}, {2, 3, 4}, {7, 7, 7},
	{6, 64, 16}, {13, 17, 19}, {24, 16, 33}, {25, 16, 257}, {12, 32, 5}, {31, 33, 65}, {50, 128, 128},
	{100, 16, 128}, {77, 129, 300}, {128, 128, 700}, {40, 40, 3000}, {9, 7, 2708}, {300, 520, 40},
	{1030, 16, 128}, {600, 128, 16}, {16, 600, 5},
}

func TestMatMulAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	impls := []struct {
		name string
		f    func(dst, a *Dense, transA bool, b *Dense, transB bool, alpha, beta float32)
	}{{"MatMul/" + MatMulImpl(), MatMul}, {"gonum", MatMulGonum}}
	for _, s := range gemmShapes {
		m, n, k := s[0], s[1], s[2]
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			ar, ac := m, k
			if tr[0] {
				ar, ac = k, m
			}
			br, bc := k, n
			if tr[1] {
				br, bc = n, k
			}
			a, b := randDense(rng, ar, ac), randDense(rng, br, bc)
			c0 := randDense(rng, m, n)
			for abi, ab := range [][2]float32{{1, 0}, {0.5, 2}, {-1, 1}, {0, 0.5}} {
				want := naiveMatMul(c0, a, tr[0], b, tr[1], ab[0], ab[1])
				tol := 1e-5 * math.Sqrt(float64(k+1)) * 4
				check := func(name string, f func(dst, a *Dense, transA bool, b *Dense, transB bool, alpha, beta float32)) {
					got := c0.Clone()
					if ab[1] == 0 {
						for i := range got.Data {
							got.Data[i] = float32(math.NaN()) // beta 0 must not read C
						}
					}
					f(got, a, tr[0], b, tr[1], ab[0], ab[1])
					if err := closeTo(got, want, tol); err != nil {
						t.Errorf("%s m=%d n=%d k=%d trans=%v alpha,beta=%v: %v", name, m, n, k, tr, ab, err)
					}
				}
				for _, im := range impls {
					check(im.name, im.f)
				}
				eachISA(t, func(_ testing.TB, isa string) {
					threads := []int{3}
					if abi == 0 {
						threads = []int{1, 2, 3}
					}
					for _, th := range threads {
						withThreads(th, func() { check(fmt.Sprintf("native-%s/%dthreads", isa, th), MatMulNative) })
					}
				})
			}
		}
	}
}

func TestMatMulShapeErrors(t *testing.T) {
	a, b := NewDense(3, 4), NewDense(4, 5)
	if err := CheckMatMul(NewDense(3, 5), a, false, b, false); err != nil {
		t.Fatal(err)
	}
	bad := []func() error{
		func() error { return CheckMatMul(NewDense(3, 4), a, false, b, false) },
		func() error { return CheckMatMul(NewDense(3, 5), a, true, b, false) },
		func() error { return CheckMatMul(NewDense(4, 4), a, true, b, true) },
		func() error { return CheckMatMul(NewDense(3, 5), a, false, &Dense{Rows: 4, Cols: 5}, false) },
	}
	for i, f := range bad {
		if f() == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

func TestMatMulNoAlloc(t *testing.T) {
	if pickKernels(128) == nil && MatMulImpl()[:3] != "ope" {
		t.Skip("no assembly kernels: MatMul runs gonum's blas32, which allocates")
	}
	rng := rand.New(rand.NewPCG(23, 24))
	for _, s := range [][3]int{{4000, 128, 128}, {128, 128, 4000}, {2000, 16, 128}, {100, 7, 16}} {
		m, n, k := s[0], s[1], s[2]
		a, b, c := randDense(rng, m, k), randDense(rng, k, n), NewDense(m, n)
		at := randDense(rng, k, m)
		withThreads(2, func() {
			MatMul(c, a, false, b, false, 1, 0)
			MatMul(c, at, true, b, false, 1, 0)
			if got := testing.AllocsPerRun(10, func() { MatMul(c, a, false, b, false, 1, 0) }); got != 0 {
				t.Errorf("%v: MatMul allocates %v times", s, got)
			}
			if got := testing.AllocsPerRun(10, func() { MatMul(c, at, true, b, false, 1, 1) }); got != 0 {
				t.Errorf("%v transA: MatMul allocates %v times", s, got)
			}
		})
	}
}
