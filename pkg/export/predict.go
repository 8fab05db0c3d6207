package export

import (
	"math"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Predict returns the class of every row of logits (the first largest logit, as accuracy counts
// it) and the class probabilities, the softmax of the row computed in float64.
func Predict(logits *tensor.Dense) (classes []int32, probs []float32) {
	n, c := logits.Rows, logits.Cols
	classes, probs = make([]int32, n), make([]float32, n*c)
	tensor.ParallelFor(n, 1<<12, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row, out := logits.Data[i*c:(i+1)*c], probs[i*c:(i+1)*c]
			best := 0
			for j, v := range row {
				if v > row[best] {
					best = j
				}
			}
			classes[i] = int32(best)
			m, sum := float64(row[best]), 0.0
			for _, v := range row {
				sum += math.Exp(float64(v) - m)
			}
			for j, v := range row {
				out[j] = float32(math.Exp(float64(v)-m) / sum)
			}
		}
	})
	return classes, probs
}
