package model

// Learner is a single-process trainer of any model: Trainer (GCN) and GATTrainer.
type Learner interface {
	// Epoch runs one training epoch and returns its training loss.
	Epoch(epoch int) (float64, error)
	// Evaluate scores every split with a forward pass without dropout.
	Evaluate() (Metrics, error)
}

var (
	_ Learner = (*Trainer)(nil)
	_ Learner = (*GATTrainer)(nil)
)
