package graphserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

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
	done    bool           // every partition reported
	curve   []export.Point // the run's, once done
}

// exportID is the evaluation id of the export pass: no epoch's.
func (c *Config) exportID() uint32 { return uint32(c.Epochs) }

// shareWriter returns the writer of this partition's outputs of an export pass (cfg.Export),
// which lists the files it wrote.
func shareWriter(cfg *Config) sharePublisher {
	return func(ctx context.Context, logits, emb *tensor.Dense) ([]*rpc.ExportedFile, error) {
		w := &export.Writer{Store: cfg.Export.Store}
		if err := w.PutPartition(ctx, cfg.Data, logits, emb); err != nil {
			return nil, err
		}
		var out []*rpc.ExportedFile
		for _, f := range w.Files() {
			out = append(out, &rpc.ExportedFile{Name: f.Name, Bytes: f.Bytes, Sha256: f.SHA256})
		}
		return out, nil
	}
}

// writeModel writes graph server 0's part of export pass x, once every partition wrote its
// own: a training run's model (its weights from weights, named by m), or an inference's
// manifest. It returns the names of all the files the export wrote.
func writeModel(ctx context.Context, cfg *Config, x *pendingExport, weights *weightCache, m variant) ([]string, error) {
	w := &export.Writer{Store: cfg.Export.Store}
	var err error
	if cfg.Weights != nil {
		err = writeManifest(ctx, cfg, w, x)
	} else {
		err = writeTrained(ctx, cfg, w, x, weights, m)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrExport, err)
	}
	return w.Names(), nil
}

// writeTrained writes the model of a training run with w, the card last.
func writeTrained(ctx context.Context, cfg *Config, w *export.Writer, x *pendingExport, weights *weightCache, m variant) error {
	params, err := weights.at(ctx, int(x.version))
	if err != nil {
		return err
	}
	b, err := safetensors.Encode(export.Capture(m.slots(params)), map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	if err := w.Put(ctx, export.WeightsFile, b); err != nil {
		return err
	}
	if err := putIndex(ctx, cfg, w, x); err != nil {
		return err
	}
	c := cfg.Export.Card
	h := export.History[Event]{Report: x.result, Seed: cfg.Seed, Curve: x.curve}
	if err := export.PutHistory(ctx, w, h, c.Dataset.Name); err != nil {
		return err
	}
	c.Seed, c.Epochs, c.Epoch = cfg.Seed, x.result.Epoch, x.result.Epoch
	if x.result.Selected > 0 {
		c.Epoch = x.result.Selected
	}
	c.Accuracy = x.accuracy()
	return w.PutCard(ctx, c)
}

// writeManifest writes graph server 0's part of an inference with w: the index and
// predict.json.
func writeManifest(ctx context.Context, cfg *Config, w *export.Writer, x *pendingExport) error {
	if err := putIndex(ctx, cfg, w, x); err != nil {
		return err
	}
	c := cfg.Export.Card
	m := export.Manifest{Model: cfg.Export.Model, Architecture: c.Architecture, TrainedOn: c.Dataset,
		Dataset: export.PartitionDataset(cfg.Data), Accuracy: x.accuracy()}
	return w.PutManifest(ctx, m)
}

// putIndex records the partitions' files of the export pass and publishes the index of them.
func putIndex(ctx context.Context, cfg *Config, w *export.Writer, x *pendingExport) error {
	for _, files := range x.files {
		for _, f := range files {
			w.Add(export.File{Name: f.Name, Bytes: f.Bytes, SHA256: f.Sha256})
		}
	}
	return w.PutJSON(ctx, export.IndexFile, export.NewIndex(cfg.Data.Meta.NumNodes, cfg.Partitions, cfg.Layers > 1))
}

// accuracy returns the accuracies of the export pass.
func (x *pendingExport) accuracy() export.Accuracy {
	return export.Accuracy{Train: x.metrics.TrainAcc, Val: x.metrics.ValAcc, Test: x.metrics.TestAcc}
}
