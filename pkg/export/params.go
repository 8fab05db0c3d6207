package export

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// ErrShape is wrapped by the error Load returns when the saved tensors do not fit the model.
var ErrShape = errors.New("the model does not fit")

// ErrNotFinite is wrapped by the error Load returns for a NaN or infinite parameter.
var ErrNotFinite = errors.New("not finite (NaN or infinite)")

// Slot is one named parameter of a model, aliased: Data is the model's own storage.
type Slot struct {
	Name  string
	Shape []int
	Data  []float32
}

// Slots returns the parameters of a GCN or GraphSAGE (model.Trainer) or GAT
// (model.GATTrainer) by their export names, in file order: layer 0's weight (GraphSAGE:
// weight_self, weight_neigh), bias, att_src, att_dst, then layer 1's, ….
func Slots(l model.Learner) ([]Slot, error) {
	switch t := l.(type) {
	case *model.Trainer:
		if t.SAGE() {
			return SAGESlots(t.Weights()), nil
		}
		return GCNSlots(t.Weights()), nil
	case *model.GATTrainer:
		return GATSlots(t.Params()), nil
	}
	return nil, fmt.Errorf("export: a %T has no named parameters", l)
}

// GCNSlots names the weights of a GCN's layers.
func GCNSlots(weights []*tensor.Dense) []Slot {
	var out []Slot
	for i, w := range weights {
		out = append(out, Slot{layer(i, "weight"), []int{w.Rows, w.Cols}, w.Data})
	}
	return out
}

// SAGESlots names the two halves of each GraphSAGE layer's weight [W_self; W_neigh]
// (2·in × out): layers.l.weight_self multiplies the vertex's own row, layers.l.weight_neigh the
// mean of its in-neighbours' rows, each in × out.
func SAGESlots(weights []*tensor.Dense) []Slot {
	var out []Slot
	for i, w := range weights {
		in, half := w.Rows/2, len(w.Data)/2
		out = append(out,
			Slot{layer(i, "weight_self"), []int{in, w.Cols}, w.Data[:half]},
			Slot{layer(i, "weight_neigh"), []int{in, w.Cols}, w.Data[half:]})
	}
	return out
}

// GATSlots names the parameters of a GAT's layers.
func GATSlots(params model.GATParams) []Slot {
	var out []Slot
	for i, p := range params {
		out = append(out,
			Slot{layer(i, "weight"), []int{p.W.Rows, p.W.Cols}, p.W.Data},
			Slot{layer(i, "bias"), []int{len(p.Bias.Data)}, p.Bias.Data},
			Slot{layer(i, "att_src"), []int{p.ASrc.Rows, p.ASrc.Cols}, p.ASrc.Data},
			Slot{layer(i, "att_dst"), []int{p.ADst.Rows, p.ADst.Cols}, p.ADst.Data})
	}
	return out
}

func layer(l int, what string) string { return "layers." + strconv.Itoa(l) + "." + what }

// Capture returns a copy of the slots' current values as tensors.
func Capture(slots []Slot) []safetensors.Tensor {
	out := make([]safetensors.Tensor, len(slots))
	for i, s := range slots {
		out[i] = safetensors.Tensor{Name: s.Name, Shape: slices.Clone(s.Shape), Data: slices.Clone(s.Data)}
	}
	return out
}

// Load copies tensors into the slots of a model built for a dataset (named in errors). Every
// slot must have a tensor of its shape and every tensor a slot; the first that does not is an
// error wrapping ErrShape that names the tensor, its shape and the shape the dataset needs. A NaN
// or infinite value is an error wrapping ErrNotFinite. Nothing is copied unless everything fits.
func Load(slots []Slot, tensors []safetensors.Tensor, dataset string) error {
	byName := make(map[string]safetensors.Tensor, len(tensors))
	for _, t := range tensors {
		byName[t.Name] = t
	}
	wanted := make(map[string]bool, len(slots))
	for _, s := range slots {
		wanted[s.Name] = true
		t, ok := byName[s.Name]
		if !ok {
			return fmt.Errorf("%w: it has no tensor %s, which dataset %s needs with shape %v", ErrShape, s.Name, dataset, s.Shape)
		}
		if !slices.Equal(t.Shape, s.Shape) || len(t.Data) != len(s.Data) {
			return fmt.Errorf("%w: tensor %s has shape %v (%d values), dataset %s needs %v", ErrShape, s.Name, t.Shape, len(t.Data), dataset, s.Shape)
		}
		for i, v := range t.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("tensor %s: element %d is %v: %w", s.Name, i, v, ErrNotFinite)
			}
		}
	}
	for _, t := range tensors {
		if !wanted[t.Name] {
			return fmt.Errorf("%w: tensor %s (shape %v) is not a parameter of this model", ErrShape, t.Name, t.Shape)
		}
	}
	for _, s := range slots {
		copy(s.Data, byName[s.Name].Data)
	}
	return nil
}
