package graphserver

import (
	"fmt"
	"runtime"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// FromRunConfig returns the settings of graph server partition of the run c describes
// (pkg/jobconfig, validated): the run, the model, training and the peers. What the process
// builds or opens itself — Data, Backend, Pull, TLS, Health, Events, Log, Status, Metrics,
// Trace, Export, Weights, Started, CostBefore and CallsBefore — it leaves unset. Cost is graph server 0's
// alone.
func FromRunConfig(c *jobconfig.RunConfig, partition int) (Config, error) {
	peers := c.GraphServers.Peers
	if partition < 0 || partition >= len(peers) {
		return Config{}, fmt.Errorf("partition %d: the run config has partitions 0..%d", partition, len(peers)-1)
	}
	cfg := Config{
		Partition: partition, Partitions: len(peers), Intervals: intervalsOf(c),
		Peers: peers, ParamServers: c.ParameterServers.Shards, Run: c.Job.Namespace + "/" + c.Job.Name + "/" + c.Job.UID,
		Layers: c.Model.Layers, Hidden: c.Model.Hidden, Dropout: c.Model.Dropout, AttentionDropout: c.Model.Dropout,
		LearningRate: c.Training.LearningRate, WeightDecay: c.Training.WeightDecay,
		Epochs: c.Training.Epochs, Seed: uint64(c.Training.Seed), Staleness: c.Training.Staleness, UpdateEvery: c.Training.UpdateEvery,
		TargetAccuracy: c.Training.TargetAccuracy, EvalEvery: max(c.Training.EvalEvery, 1), Patience: c.Training.Patience,
		DeadAfter: time.Duration(c.GraphServers.DeadAfter),
	}
	if partition == 0 {
		cfg.Cost = c.CostRun()
	}
	switch c.Model.Architecture {
	case jobconfig.ArchitectureGAT:
		cfg.Heads, cfg.OutHeads = c.Model.Heads, 1
	case jobconfig.ArchitectureSAGE:
		cfg.SAGE = true
	}
	if c.Checkpoint != nil && !c.Training.Staleness.Sync() {
		cfg.DrainEvery = c.Checkpoint.IntervalEpochs // the parameter servers checkpoint there
	}
	return cfg, nil
}

// intervalsOf returns the intervals per graph server of c: its own, else as many as the
// backend runs tasks at once (a cpu backend's workers, a remote one's calls in flight), else
// one per core.
func intervalsOf(c *jobconfig.RunConfig) int {
	if n := c.Training.Intervals; n > 0 {
		return n
	}
	n := 0
	switch b := c.Backend; {
	case b.CPU != nil && b.Kind == jobconfig.BackendCPU:
		n = b.CPU.Workers
	case b.Lambda != nil && b.Kind == jobconfig.BackendLambda:
		n = b.Lambda.MaxConcurrency
	case b.Knative != nil && b.Kind == jobconfig.BackendKnative:
		n = b.Knative.MaxConcurrency
	}
	if n == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return n
}
