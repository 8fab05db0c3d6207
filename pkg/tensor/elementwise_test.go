package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

var elemShapes = [][2]int{{0, 0}, {0, 4}, {1, 1}, {1, 7}, {3, 5}, {100, 128}, {1000, 300}}

func TestElementwiseAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, s := range elemShapes {
		for _, th := range []int{1, 2, 3} {
			withThreads(th, func() {
				x := randDense(rng, s[0], s[1])
				if len(x.Data) > 2 {
					x.Data[0] = float32(math.Copysign(0, -1))
					x.Data[1] = 0
				}
				y := randDense(rng, s[0], s[1])

				got := NewDense(s[0], s[1])
				ReLU(got, x)
				for i, v := range x.Data {
					if want := float32(math.Max(float64(v), 0)); got.Data[i] != want || math.Signbit(float64(got.Data[i])) {
						t.Fatalf("ReLU(%g) = %g", v, got.Data[i])
					}
				}
				alias := x.Clone()
				ReLU(alias, alias)
				if !equalDense(alias, got) {
					t.Fatal("ReLU in place differs")
				}

				g := y.Clone()
				ReLUBackward(g, got)
				for i := range g.Data {
					want := y.Data[i]
					if got.Data[i] <= 0 {
						want = 0
					}
					if g.Data[i] != want {
						t.Fatalf("ReLUBackward at %d: %g, want %g", i, g.Data[i], want)
					}
				}

				a := x.Clone()
				AddInPlace(a, y)
				b := x.Clone()
				AddScaled(b, -0.5, y)
				c := x.Clone()
				Scale(c, 3)
				d := NewDense(s[0], s[1])
				Copy(d, x)
				for i := range x.Data {
					if a.Data[i] != x.Data[i]+y.Data[i] || b.Data[i] != x.Data[i]-0.5*y.Data[i] || c.Data[i] != 3*x.Data[i] || d.Data[i] != x.Data[i] {
						t.Fatalf("AddInPlace/AddScaled/Scale/Copy wrong at %d", i)
					}
				}

				v := make([]float32, s[1])
				for j := range v {
					v[j] = float32(j)
				}
				e := x.Clone()
				AddRowVector(e, v)
				sums := make([]float32, s[1])
				ColSums(sums, x)
				for j := 0; j < s[1]; j++ {
					want := 0.0
					for i := 0; i < s[0]; i++ {
						want += float64(x.Data[i*s[1]+j])
						if e.Data[i*s[1]+j] != x.Data[i*s[1]+j]+v[j] {
							t.Fatal("AddRowVector wrong")
						}
					}
					if math.Abs(float64(sums[j])-want) > 1e-4*(1+math.Abs(want)) {
						t.Fatalf("ColSums[%d] = %g, want %g", j, sums[j], want)
					}
				}
			})
		}
	}
}

func TestElementwiseShapeErrors(t *testing.T) {
	for name, f := range map[string]func(){
		"ReLU":         func() { ReLU(NewDense(2, 3), NewDense(3, 2)) },
		"ReLUBackward": func() { ReLUBackward(NewDense(2, 3), NewDense(2, 2)) },
		"AddInPlace":   func() { AddInPlace(NewDense(2, 3), NewDense(1, 3)) },
		"AddRowVector": func() { AddRowVector(NewDense(2, 3), make([]float32, 2)) },
		"ColSums":      func() { ColSums(make([]float32, 2), NewDense(2, 3)) },
		"Dropout":      func() { Dropout(NewDense(2, 3), NewDense(2, 4), 0.5, 1, 0, nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
	if err := CheckSameShape("x", NewDense(2, 3), &Dense{Rows: 2, Cols: 3}); err == nil {
		t.Error("CheckSameShape accepted a matrix without data")
	}
}

func TestElementwiseNoAlloc(t *testing.T) {
	x, y := randDense(rand.New(rand.NewPCG(1, 1)), 2000, 128), NewDense(2000, 128)
	sums := make([]float32, 128)
	v := make([]float32, 128)
	withThreads(2, func() {
		for name, f := range map[string]func(){
			"ReLU":         func() { ReLU(y, x) },
			"ReLUBackward": func() { ReLUBackward(y, x) },
			"AddInPlace":   func() { AddInPlace(y, x) },
			"Scale":        func() { Scale(y, 0.5) },
			"Copy":         func() { Copy(y, x) },
			"AddRowVector": func() { AddRowVector(y, v) },
			"ColSums":      func() { ColSums(sums, x) },
		} {
			f()
			if n := testing.AllocsPerRun(20, f); n != 0 {
				t.Errorf("%s allocates %v times a call", name, n)
			}
		}
	})
}

// TestAdamStep checks AdamStep (the AVX-512 kernel where there is one, over 1–3 threads)
// against the formula evaluated one element at a time in float32, bit for bit, on lengths
// that leave every tail, with and without weight decay.
func TestAdamStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	shapes := append([][2]int{}, elemShapes...)
	for n := 1; n <= 70; n++ {
		shapes = append(shapes, [2]int{1, n})
	}
	for _, s := range shapes {
		for _, th := range []int{1, 2, 3} {
			for _, decay := range []float32{0, 5e-4} {
				a := Adam{Decay: decay, Beta1: 0.9, Beta2: 0.999, Step: 0.01 / 0.19, SqrtC2: 0.0447, Eps: 1e-8}
				w, g, m := randDense(rng, s[0], s[1]), randDense(rng, s[0], s[1]), randDense(rng, s[0], s[1])
				v := randDense(rng, s[0], s[1])
				for i := range v.Data {
					v.Data[i] *= v.Data[i] // a second moment is not negative
				}
				if len(g.Data) > 1 {
					g.Data[0], m.Data[0], v.Data[0] = 0, 0, 0
				}
				want := [4]*Dense{w.Clone(), g.Clone(), m.Clone(), v.Clone()}
				for i, wi := range want[0].Data {
					gi := want[1].Data[i] + a.Decay*wi
					mi := a.Beta1*want[2].Data[i] + (1-a.Beta1)*gi
					vi := a.Beta2*want[3].Data[i] + (1-a.Beta2)*gi*gi
					want[2].Data[i], want[3].Data[i] = mi, vi
					want[0].Data[i] = wi - a.Step*mi/(float32(math.Sqrt(float64(vi)))/a.SqrtC2+a.Eps)
				}
				withThreads(th, func() { AdamStep(w, g, m, v, a) })
				for k, got := range [4]*Dense{w, g, m, v} {
					for i := range got.Data {
						if math.Float32bits(got.Data[i]) != math.Float32bits(want[k].Data[i]) {
							t.Fatalf("%v, %d threads, decay %g: operand %d at %d is %g, want %g", s, th, decay, k, i, got.Data[i], want[k].Data[i])
						}
					}
				}
			}
		}
	}
}
