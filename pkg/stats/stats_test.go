package stats

import (
	"math"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1, 9}, 5},
	} {
		in := slices.Clone(c.xs)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median changed its input %v to %v", in, c.xs)
		}
	}
}

func TestMeanStd(t *testing.T) {
	for _, c := range []struct {
		xs        []float64
		mean, std float64
	}{
		{[]float64{2}, 2, 0},
		{[]float64{1, 3}, 2, 1},
		{[]float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, 2},
	} {
		if mean, std := MeanStd(c.xs); math.Abs(mean-c.mean) > 1e-12 || math.Abs(std-c.std) > 1e-12 {
			t.Errorf("MeanStd(%v) = %v, %v, want %v, %v", c.xs, mean, std, c.mean, c.std)
		}
	}
	if mean, std := MeanStd(nil); !math.IsNaN(mean) || !math.IsNaN(std) {
		t.Errorf("MeanStd(nil) = %v, %v, want NaN, NaN", mean, std)
	}
}
