package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// naiveCE is the float64 reference loss.
func naiveCE(logits *Dense, labels, rows []int32) float64 {
	if len(rows) == 0 {
		return 0
	}
	n, sum := logits.Cols, 0.0
	for _, r := range rows {
		row := logits.Data[int(r)*n : int(r)*n+n]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		sum += m + math.Log(s) - float64(row[labels[r]])
	}
	return sum / float64(len(rows))
}

func randLabels(rng *rand.Rand, n, classes int) ([]int32, []int32) {
	labels := make([]int32, n)
	var rows []int32
	for i := range labels {
		labels[i] = int32(rng.IntN(classes))
		if rng.IntN(3) == 0 {
			rows = append(rows, int32(i))
		}
	}
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	return labels, rows
}

func TestSoftmaxCrossEntropyAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, s := range [][2]int{{1, 1}, {1, 7}, {5, 3}, {300, 16}, {5000, 7}} {
		logits := randDense(rng, s[0], s[1])
		Scale(logits, 3)
		labels, rows := randLabels(rng, s[0], s[1])
		if s[0] == 1 {
			rows = []int32{0}
		}
		want := naiveCE(logits, labels, rows)
		for _, th := range []int{1, 2} {
			withThreads(th, func() {
				grad := randDense(rng, s[0], s[1])
				got := SoftmaxCrossEntropy(logits, labels, rows, grad)
				if math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
					t.Errorf("%v: loss %g, want %g", s, got, want)
				}
				if g2 := SoftmaxCrossEntropy(logits, labels, rows, nil); g2 != got {
					t.Errorf("%v: loss without gradient %g, with %g", s, g2, got)
				}
				in := make([]bool, s[0])
				for _, r := range rows {
					in[r] = true
				}
				for i := 0; i < s[0]; i++ {
					rowSum := 0.0
					for j := 0; j < s[1]; j++ {
						g := grad.Data[i*s[1]+j]
						if !in[i] && g != 0 {
							t.Fatalf("%v: gradient on row %d outside rows", s, i)
						}
						rowSum += float64(g)
					}
					if math.Abs(rowSum) > 1e-6 {
						t.Fatalf("%v: gradient row %d sums to %g", s, i, rowSum)
					}
				}
			})
		}
	}
}

func TestSoftmaxCrossEntropyFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	logits := randDense(rng, 40, 6)
	labels, rows := randLabels(rng, 40, 6)
	grad := NewDense(40, 6)
	SoftmaxCrossEntropy(logits, labels, rows, grad)
	// central differences of the float64 reference loss at float64 positions
	x := make([]float64, len(logits.Data))
	for i, v := range logits.Data {
		x[i] = float64(v)
	}
	loss := func() float64 {
		sum := 0.0
		for _, r := range rows {
			row := x[int(r)*6 : int(r)*6+6]
			m := math.Inf(-1)
			for _, v := range row {
				m = math.Max(m, v)
			}
			s := 0.0
			for _, v := range row {
				s += math.Exp(v - m)
			}
			sum += m + math.Log(s) - row[labels[r]]
		}
		return sum / float64(len(rows))
	}
	const h = 1e-5
	for i := range x {
		x0 := x[i]
		x[i] = x0 + h
		up := loss()
		x[i] = x0 - h
		down := loss()
		x[i] = x0
		fd := (up - down) / (2 * h)
		if math.Abs(fd-float64(grad.Data[i])) > 1e-5 {
			t.Errorf("dLoss/dlogit[%d] = %g, finite difference %g", i, grad.Data[i], fd)
		}
	}
}

func TestSoftmaxCrossEntropyStable(t *testing.T) {
	logits := &Dense{Rows: 2, Cols: 3, Data: []float32{1e30, -1e30, 0, 88, 89, -3e38}}
	labels := []int32{1, 0}
	grad := NewDense(2, 3)
	l := SoftmaxCrossEntropy(logits, labels, []int32{0, 1}, grad)
	if math.IsNaN(l) || math.IsInf(l, 0) {
		t.Fatalf("loss %g", l)
	}
	if want := naiveCE(logits, labels, []int32{0, 1}); math.Abs(l-want) > 1e-3*math.Abs(want) {
		t.Errorf("loss %g, want %g", l, want)
	}
	for _, g := range grad.Data {
		if math.IsNaN(float64(g)) {
			t.Fatal("NaN gradient")
		}
	}
	if SoftmaxCrossEntropy(logits, labels, nil, nil) != 0 {
		t.Error("no rows: want 0")
	}
	if err := CheckLabels(logits, []int32{5, 0}, []int32{0}); err == nil {
		t.Error("CheckLabels accepted label 5 of 3 classes")
	}
	if err := CheckLabels(logits, labels, []int32{2}); err == nil {
		t.Error("CheckLabels accepted row 2 of 2")
	}
}

func TestAccuracy(t *testing.T) {
	logits := &Dense{Rows: 4, Cols: 3, Data: []float32{0, 1, 0, 5, 5, 1, 2, 1, 3, 0, 0, 0}}
	labels := []int32{1, 0, 0, 0} // row 1 ties (first wins), row 2 misses, row 3 all equal
	if a := Accuracy(logits, labels, []int32{0, 1, 2, 3}); a != 0.75 {
		t.Errorf("accuracy %g, want 0.75", a)
	}
	if a := Accuracy(logits, labels, []int32{2}); a != 0 {
		t.Errorf("accuracy %g, want 0", a)
	}
	if a := Accuracy(logits, labels, nil); a != 0 {
		t.Errorf("accuracy %g, want 0", a)
	}
}

func TestExpNeg(t *testing.T) {
	worst := 0.0
	for x := -87.0; x <= 0; x += 0.0007 {
		got, want := float64(expSoftmax(float32(x))), math.Exp(float64(float32(x)))
		worst = max(worst, math.Abs(got-want)/want)
	}
	if worst > 4e-7 {
		t.Errorf("expSoftmax relative error %g", worst)
	}
	if got := expSoftmax(-1000); got > 1e-37 || got < 0 {
		t.Errorf("expSoftmax(-1000) = %g", got)
	}
}

func TestSoftmaxCrossEntropyNaN(t *testing.T) {
	logits := &Dense{Rows: 2, Cols: 3, Data: []float32{1, float32(math.NaN()), 0, 1, 2, float32(math.Inf(1))}}
	for _, rows := range [][]int32{{0}, {1}} {
		grad := NewDense(2, 3)
		if l := SoftmaxCrossEntropy(logits, []int32{0, 0}, rows, grad); !math.IsNaN(l) {
			t.Errorf("rows %v: loss %g, want NaN", rows, l)
		}
		if g := grad.Data[int(rows[0])*3]; !math.IsNaN(float64(g)) {
			t.Errorf("rows %v: gradient %g, want NaN", rows, g)
		}
	}
}

func TestSoftmaxNoAlloc(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	logits := randDense(rng, 20000, 16)
	labels, rows := randLabels(rng, 20000, 16)
	grad := NewDense(20000, 16)
	withThreads(2, func() {
		f := func() { SoftmaxCrossEntropy(logits, labels, rows, grad) }
		f()
		if n := testing.AllocsPerRun(20, f); n != 0 {
			t.Errorf("SoftmaxCrossEntropy allocates %v times a call", n)
		}
		if n := testing.AllocsPerRun(20, func() { Accuracy(logits, labels, rows) }); n != 0 {
			t.Errorf("Accuracy allocates %v times a call", n)
		}
	})
}
