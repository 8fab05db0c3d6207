package model

import (
	"fmt"
	"math"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// AdamConfig holds the hyper-parameters of Adam (Kingma & Ba 2015) with L2 weight decay added to
// the gradient, as torch.optim.Adam does.
type AdamConfig struct {
	LR          float32
	Beta1       float32
	Beta2       float32
	Eps         float32
	WeightDecay []float32 // per layer; Kipf's GCN decays only layer 0
}

// DefaultAdam returns lr, the usual betas and epsilon, and weight decay wd on layer 0 only.
func DefaultAdam(lr, wd float32, layers int) AdamConfig {
	decay := make([]float32, layers)
	decay[0] = wd
	return AdamConfig{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: decay}
}

// Adam is the optimizer state of the WU task: first and second moments per weight.
type Adam struct {
	cfg  AdamConfig
	m, v []*tensor.Dense
	step int
}

// NewAdam returns an optimizer for weights of the given shapes.
func NewAdam(cfg AdamConfig, weights []*tensor.Dense) (*Adam, error) {
	if len(cfg.WeightDecay) != len(weights) {
		return nil, fmt.Errorf("adam: %d weight-decay values for %d weights", len(cfg.WeightDecay), len(weights))
	}
	a := &Adam{cfg: cfg}
	for _, w := range weights {
		a.m = append(a.m, tensor.NewDense(w.Rows, w.Cols))
		a.v = append(a.v, tensor.NewDense(w.Rows, w.Cols))
	}
	return a, nil
}

// Step is the WeightUpdate task: it applies one Adam step to every weight from its summed gradient.
func (a *Adam) Step(weights, grads []*tensor.Dense) error {
	if len(weights) != len(a.m) || len(grads) != len(a.m) {
		return fmt.Errorf("adam: %d weights and %d gradients, optimizer has %d: %w", len(weights), len(grads), len(a.m), ErrShape)
	}
	a.step++
	c1 := 1 - math.Pow(float64(a.cfg.Beta1), float64(a.step))
	c2 := 1 - math.Pow(float64(a.cfg.Beta2), float64(a.step))
	step := tensor.Adam{Beta1: a.cfg.Beta1, Beta2: a.cfg.Beta2, Eps: a.cfg.Eps,
		Step: float32(float64(a.cfg.LR) / c1), SqrtC2: float32(math.Sqrt(c2))}
	for l, w := range weights {
		if err := tensor.CheckSameShape("adam", w, grads[l]); err != nil {
			return fmt.Errorf("adam: layer %d gradient: %v: %w", l, err, ErrShape)
		}
		if err := tensor.CheckSameShape("adam", w, a.m[l]); err != nil {
			return fmt.Errorf("adam: layer %d weight: %v: %w", l, err, ErrShape)
		}
		step.Decay = a.cfg.WeightDecay[l]
		tensor.AdamStep(w, grads[l], a.m[l], a.v[l], step)
	}
	return nil
}

// Steps returns the number of updates applied so far.
func (a *Adam) Steps() int { return a.step }
