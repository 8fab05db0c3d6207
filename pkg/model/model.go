package model

// Learner is a single-process trainer of any model: Trainer (GCN) and GATTrainer.
type Learner interface {
	// Epoch runs one training epoch and returns its training loss.
	Epoch(epoch int) (float64, error)
	// Evaluate scores every split with a forward pass without dropout.
	Evaluate() (Metrics, error)
	// Snapshot returns the resumable state, aliased: parameters and optimiser moments by
	// name, and the number of updates applied.
	Snapshot() (map[string][]float32, int)
	// Restore puts a Snapshot back.
	Restore(tensors map[string][]float32, steps int) error
}

var (
	_ Learner = (*Trainer)(nil)
	_ Learner = (*GATTrainer)(nil)
)
