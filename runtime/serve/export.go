package serve

import (
	"context"
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// OpenLocation opens a run config's location as a store.
func OpenLocation(ctx context.Context, l jobconfig.Location) (checkpoint.Store, error) {
	var cfg objstore.Config
	if s := l.S3; s != nil {
		cfg = objstore.Config{Region: s.Region, Endpoint: s.Endpoint, CredentialsDir: s.CredentialsDir}
	}
	return checkpoint.Open(ctx, l.URI(), cfg)
}

// readInferenceModel reads the model an inference run c predicts with (checked against the
// sizes and checksums its card lists) and makes c's model the card's.
func readInferenceModel(ctx context.Context, c *jobconfig.RunConfig) (*export.Model, error) {
	st, err := OpenLocation(ctx, c.Inference.Model)
	if err != nil {
		return nil, fmt.Errorf("inference model: %w", err)
	}
	m, err := export.Read(ctx, st)
	if err != nil {
		return nil, err
	}
	k := m.Card
	c.Model = jobconfig.Model{Architecture: jobconfig.ArchitectureOf(k.Architecture), Layers: k.Layers, Hidden: k.Hidden, Heads: k.Heads, Dropout: k.Training.Dropout}
	return m, nil
}

// cardOf returns the card of the model run c trains on d, whose features are normalised as
// features.
func cardOf(c *jobconfig.RunConfig, d export.Dataset, features string) export.Card {
	m, t := c.Model, c.Training
	return export.NewCard(jobconfig.ModelName(m.Architecture), m.Layers, m.Hidden, m.Heads,
		export.Training{LR: t.LearningRate, WeightDecay: t.WeightDecay, Dropout: m.Dropout, Patience: t.Patience}, d, features)
}

// setExport sets what graph server cfg of run c exports to, if anything: its outputs, as a new
// version of c.Output that every graph server of the run names alike, and for an inference with
// model m also the weights to predict with.
func setExport(ctx context.Context, cfg *graphserver.Config, c *jobconfig.RunConfig, m *export.Model) error {
	if c.Output == nil {
		return nil
	}
	root, err := OpenLocation(ctx, *c.Output)
	if err != nil {
		return err
	}
	run := c.Job.UID
	if run == "" {
		run = c.Job.Name
	}
	st, err := export.Begin(ctx, root, run, c.OverwriteOutput)
	if err != nil {
		return err
	}
	d := cfg.Data
	features := export.FeatureNormalisation(d.Features)
	if m == nil {
		cfg.Export = &graphserver.Export{Store: st, Card: cardOf(c, export.PartitionDataset(d), features)}
		return nil
	}
	if m.Card.Features != features {
		return fmt.Errorf("the model in %s was trained on features normalised as %q; the features of dataset %s are %q",
			c.Inference.Model.URI(), m.Card.Features, d.Meta.Name, features)
	}
	cfg.Export = &graphserver.Export{Store: st, Card: m.Card, Model: c.Inference.Model.URI()}
	cfg.Weights = m.Tensors
	return nil
}
