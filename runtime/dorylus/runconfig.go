package main

import (
	"cmp"
	"fmt"
	"os"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/source"
)

// runConfig returns the run config dorylus train writes for the servers of one seed's run:
// the command's flags in the contract the operator writes (pkg/jobconfig), with the dataset
// partitioned into dir, and the counts of graph servers and parameter-server shards, whose
// addresses the launcher sets (launcher.SetAddresses, which validates it). Its job has no
// UID: a run outside Kubernetes reports into no GNNTrainingJob's status.
func (o *trainOptions) runConfig(d *distOptions, dir string, seed uint64) (*jobconfig.RunConfig, error) {
	c := &jobconfig.RunConfig{
		Version: jobconfig.Version,
		Job:     jobconfig.JobRef{Name: fmt.Sprintf("train-%d-%d", os.Getpid(), seed), Namespace: "local"},
		Dataset: jobconfig.Dataset{Source: jobconfig.SourcePVC, Path: dir, Format: jobconfig.FormatPrepared},
		Model: jobconfig.Model{Layers: o.layers, Hidden: o.hidden,
			Dropout: o.dropout},
		Training: jobconfig.Training{Epochs: o.epochs, LearningRate: o.lr, WeightDecay: o.weightDecay,
			TargetAccuracy: d.target, Staleness: d.staleness, Intervals: d.intervals, UpdateEvery: d.updateEvery, Seed: int64(seed),
			EvalEvery: o.evalEvery, Patience: o.patience},
		GraphServers: jobconfig.GraphServers{Replicas: d.graphServers, DeadAfter: jobconfig.Duration(d.deadAfter)},
		Backend:      d.backend.ToConfig(d.intervals, cmp.Or(o.cost.lambdaMemoryMB, defaultLambdaMemoryMB)),
		Security:     jobconfig.Security{TLSDir: d.tlsDir, Insecure: d.insecure},
	}
	var err error
	if c.Cost, err = o.cost.config(); err != nil {
		return nil, err
	}
	c.Model.Architecture = jobconfig.ArchitectureOf(o.model)
	if o.model == "gat" {
		c.Model.Heads = o.heads
	}
	if o.inference != "" {
		c.Inference = &jobconfig.Inference{Model: locationOf(o.inference)}
	} else {
		c.ParameterServers.Replicas = d.paramServers
	}
	if o.patience > 0 { // selection by validation evaluates every epoch, as the single-process path does
		c.Training.EvalEvery = 1
	}
	if cp := o.checkpoint; cp.location != "" {
		l := locationOf(cp.run)
		c.Checkpoint = &jobconfig.Checkpoint{IntervalEpochs: cp.every, Keep: cp.keep, Fresh: !cp.resume, RunID: cp.runID, Path: l.Path, S3: l.S3}
	}
	if o.outputs.location != "" && seed == o.seed { // the first run's model, as without --graph-servers
		l := locationOf(o.outputs.location)
		c.Output, c.OverwriteOutput = &l, o.outputs.overwrite
	}
	return c, nil
}

// locationOf returns a folder or s3://bucket/prefix as a run config's location; S3 settings
// then come from the SDK's environment.
func locationOf(uri string) jobconfig.Location {
	if bucket, prefix, err := source.ParseS3(uri); err == nil {
		return jobconfig.Location{S3: &jobconfig.S3{Bucket: bucket, Prefix: prefix}}
	}
	return jobconfig.Location{Path: uri}
}
