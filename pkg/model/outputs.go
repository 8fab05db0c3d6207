package model

import "github.com/dorylus-gnn/dorylus/pkg/tensor"

// Predictor is a Learner whose last evaluation can be read back: the per-vertex outputs that a
// trained model's predictions and embeddings are made of.
type Predictor interface {
	Learner
	// Outputs returns what the last Evaluate computed, aliased: the logits (N × Classes) and the
	// embeddings, the input of the last layer after its activation and without dropout (N ×
	// width; nil for a one-layer model, whose input is the features).
	Outputs() (logits, embeddings *tensor.Dense)
}

var (
	_ Predictor = (*Trainer)(nil)
	_ Predictor = (*GATTrainer)(nil)
)

// Outputs returns the logits Z_{L-1} and the embeddings ReLU(Z_{L-2}) of the last Evaluate.
func (t *Trainer) Outputs() (logits, embeddings *tensor.Dense) {
	last := len(t.weights) - 1
	if last == 0 {
		return t.z[0], nil
	}
	return t.z[last], t.act[last].Dense
}

// Outputs returns the logits and the embeddings ELU(Z_{L-2} + b_{L-2}) of the last Evaluate.
func (t *GATTrainer) Outputs() (logits, embeddings *tensor.Dense) {
	last := len(t.params) - 1
	if last == 0 {
		return t.logits, nil
	}
	return t.logits, t.act[last].Dense
}
