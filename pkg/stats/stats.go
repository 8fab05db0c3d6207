// Package stats summarizes repeated measurements of a run — epoch times, the accuracies of
// several seeds — as the reports of dorylus train and dorylus plan calibrate give them.
package stats

import (
	"math"
	"slices"
)

// Median returns the median of xs (the mean of the two middle values of an even count); 0 for
// none. xs is not changed.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MeanStd returns the mean and the population standard deviation of xs; NaN for none.
func MeanStd(xs []float64) (float64, float64) {
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(v / float64(len(xs)))
}
