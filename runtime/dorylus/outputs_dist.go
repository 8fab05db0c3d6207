package main

import (
	"context"
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// locationOf returns a folder or s3://bucket/prefix as a run config's location; S3 settings
// then come from the SDK's environment.
func locationOf(uri string) jobconfig.Location {
	if bucket, prefix, err := source.ParseS3(uri); err == nil {
		return jobconfig.Location{S3: &jobconfig.S3{Bucket: bucket, Prefix: prefix}}
	}
	return jobconfig.Location{Path: uri}
}

// openLocation opens a run config's location as a store.
func openLocation(ctx context.Context, l jobconfig.Location) (checkpoint.Store, error) {
	var cfg objstore.Config
	if s := l.S3; s != nil {
		cfg = objstore.Config{Region: s.Region, Endpoint: s.Endpoint, CredentialsDir: s.CredentialsDir}
	}
	return checkpoint.Open(ctx, l.URI(), cfg)
}

// trainOptionsOf returns the model and training settings of a run config as train's options.
func trainOptionsOf(c *jobconfig.RunConfig) trainOptions {
	return trainOptions{model: jobconfig.ModelName(c.Model.Architecture), layers: c.Model.Layers, hidden: c.Model.Hidden,
		heads: c.Model.Heads, dropout: c.Model.Dropout, lr: c.Training.LearningRate, weightDecay: c.Training.WeightDecay,
		patience: c.Training.Patience}
}

// readInferenceModel reads the model an inference run c predicts with (checked against the
// sizes and checksums its card lists) and makes c's model the card's.
func readInferenceModel(ctx context.Context, c *jobconfig.RunConfig) (*export.Model, error) {
	st, err := openLocation(ctx, c.Inference.Model)
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

// setExport sets what graph server cfg of run c exports to, if anything: its outputs, as a new
// version of c.Output that every graph server of the run names alike, and for an inference with
// model m also the weights to predict with.
func setExport(ctx context.Context, cfg *graphserver.Config, c *jobconfig.RunConfig, m *export.Model) error {
	if c.Output == nil {
		return nil
	}
	root, err := openLocation(ctx, *c.Output)
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
		cfg.Export = &graphserver.Export{Store: st, Card: trainOptionsOf(c).card(export.PartitionDataset(d), features)}
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
