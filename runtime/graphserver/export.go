package graphserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Export has a run write its model and per-vertex outputs at the end (pkg/export): after the
// final evaluation, every graph server runs one more pass with the weights that evaluation
// reported (with Config.Patience, those of the kept epoch) and writes its own vertices'
// predictions, probabilities and embeddings with their dataset ids; graph server 0 then
// writes the weights, the index of the partitions' files, the history, the curves and, last,
// the card, and reports an EventExported.
//
// With Config.Weights (an inference), graph server 0 writes the index and a manifest
// (predict.json) instead of the model.
type Export struct {
	Store checkpoint.Store
	// Card describes the model; graph server 0 adds the seed, epochs, accuracies and files.
	// For an inference it is the card of the model run.
	Card export.Card
	// Model says where an inference's model was read from, for the manifest.
	Model string
}

// ErrExport is wrapped by the error that ends a run whose export failed; graph server 0
// reports it as the job's failure, since a restart would train again.
var ErrExport = errors.New("export failed")

// pendingExport is the coordinator's export pass: the weights' version, the training result,
// and what the partitions wrote.
type pendingExport struct {
	version uint64
	result  Event
	files   [][]*rpc.ExportedFile // [partition]
	metrics model.Metrics
	done    bool // every partition reported
}

// exportID is the evaluation id of the export pass: no epoch's.
func (c *Config) exportID() uint32 { return uint32(c.Epochs) }

// publishShare writes this partition's outputs of an export pass and lists them.
func (s *server) publishShare(ctx context.Context, logits, emb *tensor.Dense) ([]*rpc.ExportedFile, error) {
	w := &export.Writer{Store: s.cfg.Export.Store}
	if err := w.PutPartition(ctx, s.cfg.Data, logits, emb); err != nil {
		return nil, err
	}
	var out []*rpc.ExportedFile
	for _, f := range w.Files() {
		out = append(out, &rpc.ExportedFile{Name: f.Name, Bytes: f.Bytes, Sha256: f.SHA256})
	}
	return out, nil
}

// infer runs an inference: graph server 0 starts the export pass with the loaded weights
// (version 0), and every server serves until stopped.
func (s *server) infer(ctx context.Context) error {
	if s.coord != nil {
		if err := s.command([]*rpc.CommandRequest{s.coord.startExport(Event{}, 0)}, nil); err != nil {
			return err
		}
	}
	return s.drive(ctx)
}

// writeModel writes graph server 0's part of the export once every partition wrote its own.
func (s *server) writeModel(ctx context.Context, x *pendingExport) error {
	var err error
	if s.cfg.Weights != nil {
		err = s.writeManifest(ctx, x)
	} else {
		err = s.writeTrained(ctx, x)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExport, err)
	}
	return nil
}

// writeTrained writes the model of a training run, the card last.
func (s *server) writeTrained(ctx context.Context, x *pendingExport) error {
	cfg := &s.cfg
	params, err := s.weights.at(ctx, int(x.version))
	if err != nil {
		return err
	}
	b, err := safetensors.Encode(export.Capture(s.model.slots(params)), map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	w := &export.Writer{Store: cfg.Export.Store}
	if err := w.Put(ctx, export.WeightsFile, b); err != nil {
		return err
	}
	if err := s.putIndex(ctx, w, x); err != nil {
		return err
	}
	c := cfg.Export.Card
	h := export.History[Event]{Report: x.result, Seed: cfg.Seed, Curve: s.coord.curve}
	if err := export.PutHistory(ctx, w, h, c.Dataset.Name); err != nil {
		return err
	}
	c.Seed, c.Epochs, c.Epoch = cfg.Seed, x.result.Epoch, x.result.Epoch
	if x.result.Selected > 0 {
		c.Epoch = x.result.Selected
	}
	c.Accuracy = x.accuracy()
	if err := w.PutCard(ctx, c); err != nil {
		return err
	}
	s.post(exported{x, w.Names()})
	return nil
}

// writeManifest writes graph server 0's part of an inference: the index and predict.json.
func (s *server) writeManifest(ctx context.Context, x *pendingExport) error {
	w := &export.Writer{Store: s.cfg.Export.Store}
	if err := s.putIndex(ctx, w, x); err != nil {
		return err
	}
	c := s.cfg.Export.Card
	m := export.Manifest{Model: s.cfg.Export.Model, Architecture: c.Architecture, TrainedOn: c.Dataset,
		Dataset: export.PartitionDataset(s.cfg.Data), Accuracy: x.accuracy()}
	if err := w.PutManifest(ctx, m); err != nil {
		return err
	}
	s.post(exported{x, w.Names()})
	return nil
}

// putIndex records the partitions' files of the export pass and publishes the index of them.
func (s *server) putIndex(ctx context.Context, w *export.Writer, x *pendingExport) error {
	for _, files := range x.files {
		for _, f := range files {
			w.Add(export.File{Name: f.Name, Bytes: f.Bytes, SHA256: f.Sha256})
		}
	}
	return w.PutJSON(ctx, export.IndexFile, export.NewIndex(s.cfg.Data.Meta.NumNodes, s.cfg.Partitions, s.cfg.Layers > 1))
}

// exported reports the export pass x done, files written: as an event, and into the job's
// status at once.
func (c *coordinator) exported(x *pendingExport, files []string) error {
	acc := x.accuracy()
	ev := Event{Event: EventExported, Files: len(files), TrainAcc: acc.Train, ValAcc: &acc.Val, TestAcc: acc.Test}
	if c.status != nil {
		p := c.progress
		p.Outputs = files
		if c.cfg.Weights != nil { // an inference reports its accuracies here, training in its result
			p.TrainAccuracy, p.ValAccuracy, p.TestAccuracy = acc.Train, acc.Val, acc.Test
		}
		c.status.update(p, true)
	}
	return c.emit(ev)
}

// accuracy returns the accuracies of the export pass.
func (x *pendingExport) accuracy() export.Accuracy {
	return export.Accuracy{Train: x.metrics.TrainAcc, Val: x.metrics.ValAcc, Test: x.metrics.TestAcc}
}
