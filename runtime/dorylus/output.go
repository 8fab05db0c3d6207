package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/runpolicy"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
)

// outputOptions are the --output-dir and --overwrite flags of `dorylus train` and what it keeps
// while training.
type outputOptions struct {
	location  string
	overwrite bool
	state     *outputState // shared by every copy of the options
}

// outputState is the store to export to and the weights kept for it.
type outputState struct {
	store   checkpoint.Store
	tensors []safetensors.Tensor // a copy of the weights to export
	epoch   int                  // the epoch they are from
}

// addFlags registers --output-dir.
func (x *outputOptions) addFlags(f *pflag.FlagSet) {
	x.state = &outputState{}
	f.StringVar(&x.location, "output-dir", "", "at the end, write the trained model of the first run to this folder or s3://bucket/prefix: "+
		"weights (model.safetensors), model card (model.json), per-vertex predictions.npy, probabilities.npy and embeddings.npy, history.json and curves.png; "+
		"with --patience, the weights of the kept epoch. They are written as a new version beside what the folder holds, "+
		"and model.json, written last, switches to it: a crash leaves the old model or the new, whole")
	f.BoolVar(&x.overwrite, "overwrite", false, "replace a model or predictions already in --output-dir (without it such a folder is refused before training)")
}

// validate opens the output location and starts the new version of it, so that a bad location,
// or one holding a model without --overwrite, is refused before training. S3 settings come from
// the SDK's environment.
func (x outputOptions) validate(ctx context.Context) error {
	if x.location == "" {
		return nil
	}
	st, err := openOutput(ctx, x.location, x.overwrite)
	if err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	x.state.store = st
	return nil
}

// openOutput opens location (S3 settings from the SDK's environment) and starts a new version
// of it for a run of a fresh id.
func openOutput(ctx context.Context, location string, overwrite bool) (*export.Target, error) {
	st, err := checkpoint.Open(ctx, location, objstore.Config{})
	if err != nil {
		return nil, err
	}
	id, err := newRunID()
	if err != nil {
		return nil, err
	}
	return export.Begin(ctx, st, id, overwrite)
}

// keepOutputs runs after every epoch; with --output-dir it copies the weights to export: those of
// the first run's epoch whose accuracies are reported (with --patience the kept epoch, otherwise
// the last).
func keepOutputs(o trainOptions, tr model.Learner, sel *runpolicy.Policy, seed uint64, epoch int) error {
	if o.outputs.location == "" || seed != o.seed {
		return nil
	}
	if sel.Selects() {
		if kept, _ := sel.Best(); kept != epoch {
			return nil
		}
	} else if epoch != o.epochs {
		return nil
	}
	slots, err := export.Slots(tr)
	if err != nil {
		return err
	}
	o.outputs.state.tensors, o.outputs.state.epoch = export.Capture(slots), epoch
	return nil
}

// history is history.json: the report of the whole invocation and the curve of the exported run.
type history = export.History[trainReport]

// points returns a curve as history.json and the plots hold it.
func points(curve []epochRecord) []export.Point {
	out := make([]export.Point, 0, len(curve))
	for _, r := range curve {
		pt := export.Point{Epoch: r.Epoch, Loss: r.Loss, Seconds: r.Seconds}
		if !math.IsNaN(r.ValAcc) {
			pt.ValAcc = &r.ValAcc
		}
		out = append(out, pt)
	}
	return out
}

// writeOutputs writes the model of the first run to --output-dir, the card last.
func writeOutputs(ctx context.Context, o trainOptions, d *graph.Dataset, rep trainReport, log io.Writer) error {
	if o.outputs.location == "" {
		return nil
	}
	start, st := time.Now(), o.outputs.state
	if st.tensors == nil {
		return errors.New("--output-dir: this process trained no epoch of the first run (it resumed from its last checkpoint), so it has no weights to export")
	}
	p, err := loadPredictor(d, o, o.seed, st.tensors)
	if err != nil {
		return err
	}
	m, err := p.Evaluate()
	if err != nil {
		return err
	}
	w := &export.Writer{Store: st.store}
	weights, err := safetensors.Encode(st.tensors, map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	if err := w.Put(ctx, export.WeightsFile, weights); err != nil {
		return err
	}
	if err := writePredictions(ctx, w, p); err != nil {
		return err
	}
	run := rep.PerRun[0]
	curve := points(run.Curve)
	if err := export.PutHistory(ctx, w, history{Report: rep, Seed: run.Seed, Curve: curve}, d.Name); err != nil {
		return err
	}
	c := o.card(datasetOf(d), export.FeatureNormalisation(d.Features))
	c.Seed, c.Epochs, c.Epoch = run.Seed, run.EpochsRun, st.epoch
	c.Accuracy = export.Accuracy{Train: m.TrainAcc, Val: m.ValAcc, Test: m.TestAcc}
	if err := w.PutCard(ctx, c); err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote the model of epoch %d (test accuracy %.2f%%) and its outputs to %s in %s\n",
		st.epoch, 100*m.TestAcc, st.store, time.Since(start).Round(time.Millisecond))
	return nil
}

// card returns the card of the model o trains on a dataset, without what training decides.
func (o trainOptions) card(d export.Dataset, features string) export.Card {
	return export.NewCard(o.model, o.layers, o.hidden, o.heads,
		export.Training{LR: o.lr, WeightDecay: o.weightDecay, Dropout: o.dropout, Patience: o.patience}, d, features)
}

// loadPredictor builds the model o describes for d and puts tensors in it; tensors that do not fit
// d are refused, naming the tensor and both shapes.
func loadPredictor(d *graph.Dataset, o trainOptions, seed uint64, tensors []safetensors.Tensor) (model.Predictor, error) {
	l, err := newLearner(d, o, seed)
	if err != nil {
		return nil, err
	}
	p, ok := l.(model.Predictor)
	if !ok {
		return nil, fmt.Errorf("a %s cannot predict", o.model)
	}
	slots, err := export.Slots(l)
	if err != nil {
		return nil, err
	}
	if err := export.Load(slots, tensors, d.Name); err != nil {
		return nil, err
	}
	return p, nil
}

// writePredictions publishes the class, class probabilities and embeddings of every vertex
// from the last evaluation of p.
func writePredictions(ctx context.Context, w *export.Writer, p model.Predictor) error {
	logits, emb := p.Outputs()
	return w.PutOutputs(ctx, logits, emb, func(name string) string { return name })
}

// datasetOf describes d for a card or manifest.
func datasetOf(d *graph.Dataset) export.Dataset {
	return export.Dataset{Name: d.Name, Nodes: d.NumNodes(), Edges: d.Adj.NNZ(), Features: d.NumFeatures(), Classes: d.NumClasses}
}
