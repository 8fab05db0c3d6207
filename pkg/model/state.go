package model

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// ErrNotFinite is wrapped by the error a trainer returns when a loss, weight or gradient is NaN
// or infinite: training stops there instead of going on with garbage.
var ErrNotFinite = errors.New("not finite (NaN or infinite)")

// firstNotFinite returns the index of the first NaN or infinite element of v, or -1.
func firstNotFinite(v []float32) int {
	for i, x := range v {
		if x-x != 0 { // NaN - NaN and ±Inf - ±Inf are NaN; every finite x gives 0
			return i
		}
	}
	return -1
}

// checkFinite returns an error naming the epoch (1-based), layer and task if v holds a NaN or an
// infinity. It reads v once; callers pass weights and weight gradients, never per-vertex data.
func checkFinite(v []float32, epoch, layer int, task, what string) error {
	if i := firstNotFinite(v); i >= 0 {
		return fmt.Errorf("epoch %d, layer %d, task %s: %s element %d is %v: %w; lower the learning rate", epoch+1, layer, task, what, i, v[i], ErrNotFinite)
	}
	return nil
}

// checkLoss returns an error naming the epoch (1-based) and the output layer if loss is NaN or
// infinite.
func checkLoss(loss float64, epoch, layer int) error {
	if loss-loss != 0 {
		return fmt.Errorf("epoch %d, layer %d, task loss: the training loss is %v: %w; lower the learning rate", epoch+1, layer, loss, ErrNotFinite)
	}
	return nil
}

// Snapshot returns the optimiser's resumable state together with the parameters it updates,
// aliased, not copied: parameter i as "param/i", its moments as "adam.m/i" and "adam.v/i", and
// the number of steps taken.
func (a *Adam) Snapshot(params []*tensor.Dense) (map[string][]float32, int) {
	out := make(map[string][]float32, 3*len(params))
	for i, p := range params {
		k := strconv.Itoa(i)
		out["param/"+k], out["adam.m/"+k], out["adam.v/"+k] = p.Data, a.m[i].Data, a.v[i].Data
	}
	return out, a.step
}

// Restore copies a Snapshot back into params and the optimiser; every tensor must be present
// with the size it has here, and nothing else may be.
func (a *Adam) Restore(params []*tensor.Dense, tensors map[string][]float32, steps int) error {
	if len(params) != len(a.m) {
		return fmt.Errorf("adam: restore %d parameters into an optimizer of %d: %w", len(params), len(a.m), ErrShape)
	}
	if len(tensors) != 3*len(params) || steps < 0 {
		return fmt.Errorf("adam: the saved state has %d tensors and %d steps, want %d tensors of this model: %w", len(tensors), steps, 3*len(params), ErrShape)
	}
	into := func(name string, d *tensor.Dense) error {
		v, ok := tensors[name]
		if !ok || len(v) != len(d.Data) {
			return fmt.Errorf("adam: the saved state has %d values for %s, this model %d: %w", len(v), name, len(d.Data), ErrShape)
		}
		copy(d.Data, v)
		return nil
	}
	for i, p := range params {
		k := strconv.Itoa(i)
		for name, d := range map[string]*tensor.Dense{"param/" + k: p, "adam.m/" + k: a.m[i], "adam.v/" + k: a.v[i]} {
			if err := into(name, d); err != nil {
				return err
			}
		}
	}
	a.step = steps
	return nil
}

// Snapshot returns the trainer's resumable state (Adam.Snapshot of its weights). Dropout masks
// are keyed by (seed, epoch, layer), so with the seed and the epoch they are the whole state.
func (t *Trainer) Snapshot() (map[string][]float32, int) { return t.adam.Snapshot(t.weights) }

// Restore puts a Snapshot back.
func (t *Trainer) Restore(tensors map[string][]float32, steps int) error {
	return t.adam.Restore(t.weights, tensors, steps)
}

// Snapshot returns the trainer's resumable state (Adam.Snapshot of its parameters).
func (t *GATTrainer) Snapshot() (map[string][]float32, int) { return t.adam.Snapshot(t.flatP) }

// Restore puts a Snapshot back.
func (t *GATTrainer) Restore(tensors map[string][]float32, steps int) error {
	return t.adam.Restore(t.flatP, tensors, steps)
}
