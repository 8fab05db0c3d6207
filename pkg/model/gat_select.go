package model

import "math"

// BestValidation is the GAT paper's model selection and early stopping, as its reference code
// does it (Veličković et al. 2018): an epoch makes progress when its validation accuracy is at
// least the best so far or its validation loss at most the lowest so far; the metrics of the
// last epoch that did both are kept (the reference saves that model and tests it), and a run
// stops after Patience epochs in a row without progress. Only validation metrics steer it.
type BestValidation struct {
	patience          int
	bestAcc, bestLoss float64
	kept              Metrics
	keptEpoch         int
	stale             int
}

// NewBestValidation returns a selector that stops after patience epochs without progress
// (patience ≤ 0: never).
func NewBestValidation(patience int) *BestValidation {
	return &BestValidation{patience: patience, bestAcc: math.Inf(-1), bestLoss: math.Inf(1)}
}

// Observe records the evaluation m after epoch and reports whether the run should stop.
func (b *BestValidation) Observe(epoch int, m Metrics) bool {
	if m.ValAcc < b.bestAcc && m.ValLoss > b.bestLoss {
		b.stale++
		return b.patience > 0 && b.stale >= b.patience
	}
	if m.ValAcc >= b.bestAcc && m.ValLoss <= b.bestLoss {
		b.kept, b.keptEpoch = m, epoch
	}
	b.bestAcc, b.bestLoss = max(b.bestAcc, m.ValAcc), min(b.bestLoss, m.ValLoss)
	b.stale = 0
	return false
}

// Best returns the kept epoch and its metrics (epoch 0 before any observation).
func (b *BestValidation) Best() (int, Metrics) { return b.keptEpoch, b.kept }
