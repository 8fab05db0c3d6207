package graphserver

import (
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// runConfig is a valid run config of two graph servers and two parameter-server shards, a
// GCN trained asynchronously with staleness 2 on the cpu backend.
func runConfig() *jobconfig.RunConfig {
	return &jobconfig.RunConfig{
		Version: jobconfig.Version,
		Job:     jobconfig.JobRef{Name: "cora", Namespace: "ml", UID: "u-1"},
		Dataset: jobconfig.Dataset{Source: jobconfig.SourceBuiltin, Name: "cora"},
		Model:   jobconfig.Model{Architecture: jobconfig.ArchitectureGCN, Layers: 3, Hidden: 32, Dropout: 0.4},
		Training: jobconfig.Training{Epochs: 50, LearningRate: 0.02, WeightDecay: 1e-4, TargetAccuracy: 0.8,
			Staleness: jobconfig.Bounded(2), EvalEvery: 5, Intervals: 3, Seed: 7},
		GraphServers: jobconfig.GraphServers{Replicas: 2, Port: jobconfig.GraphServerPort,
			Peers: []string{"gs-0:5000", "gs-1:5000"}, DeadAfter: jobconfig.Duration(9 * time.Second)},
		ParameterServers: jobconfig.ParameterServers{Replicas: 2, Port: jobconfig.ParamServerPort,
			Service: "ps:5100", Shards: []string{"ps-0:5100", "ps-1:5100"}},
		Backend:  jobconfig.Backend{Kind: jobconfig.BackendCPU, CPU: &jobconfig.CPU{Workers: 6}},
		Security: jobconfig.Security{TLSDir: jobconfig.CredentialsDir},
	}
}

// TestFromRunConfig sets every setting a graph server takes from its run config, field by
// field, and each variation changes only the fields it names.
func TestFromRunConfig(t *testing.T) {
	base := Config{
		Partition: 1, Partitions: 2, Intervals: 3, Peers: []string{"gs-0:5000", "gs-1:5000"},
		ParamServers: []string{"ps-0:5100", "ps-1:5100"}, Run: "ml/cora/u-1",
		Layers: 3, Hidden: 32, Dropout: 0.4, AttentionDropout: 0.4, LearningRate: 0.02, WeightDecay: 1e-4,
		Epochs: 50, Seed: 7, Staleness: jobconfig.Bounded(2), TargetAccuracy: 0.8, EvalEvery: 5, DeadAfter: 9 * time.Second,
	}
	for _, c := range []struct {
		name      string
		partition int
		edit      func(*jobconfig.RunConfig)
		want      func(*Config)
	}{
		{"as written", 1, func(*jobconfig.RunConfig) {}, func(*Config) {}},
		{"sync", 1, func(r *jobconfig.RunConfig) { r.Training.Staleness = jobconfig.Sync },
			func(c *Config) { c.Staleness = jobconfig.Sync }},
		{"update every 2 intervals", 1, func(r *jobconfig.RunConfig) { r.Training.UpdateEvery = jobconfig.UpdateIntervals(2) },
			func(c *Config) { c.UpdateEvery = jobconfig.UpdateIntervals(2) }},
		{"gat", 1, func(r *jobconfig.RunConfig) { r.Model.Architecture, r.Model.Heads = jobconfig.ArchitectureGAT, 8 },
			func(c *Config) { c.Heads, c.OutHeads = 8, 1 }},
		{"patience", 1, func(r *jobconfig.RunConfig) { r.Training.Patience, r.Training.EvalEvery = 10, 0 },
			func(c *Config) { c.Patience, c.EvalEvery = 10, 1 }},
		{"async checkpoints drain", 1, func(r *jobconfig.RunConfig) {
			r.Checkpoint = &jobconfig.Checkpoint{IntervalEpochs: 4, Path: "/ckpt"}
		}, func(c *Config) { c.DrainEvery = 4 }},
		{"sync checkpoints do not drain", 1, func(r *jobconfig.RunConfig) {
			r.Checkpoint, r.Training.Staleness = &jobconfig.Checkpoint{IntervalEpochs: 4, Path: "/ckpt"}, jobconfig.Sync
		}, func(c *Config) { c.Staleness = jobconfig.Sync }},
		{"intervals from cpu workers", 1, func(r *jobconfig.RunConfig) { r.Training.Intervals = 0 },
			func(c *Config) { c.Intervals = 6 }},
		{"intervals from lambda concurrency", 1, func(r *jobconfig.RunConfig) {
			r.Training.Intervals = 0
			r.Backend = jobconfig.Backend{Kind: jobconfig.BackendLambda, Lambda: &jobconfig.Lambda{FunctionName: "f", Region: "r", MaxConcurrency: 5}}
		}, func(c *Config) { c.Intervals = 5 }},
		{"intervals from knative concurrency", 1, func(r *jobconfig.RunConfig) {
			r.Training.Intervals = 0
			r.Backend = jobconfig.Backend{Kind: jobconfig.BackendKnative, Knative: &jobconfig.Knative{URL: "http://fn", MaxConcurrency: 4}}
		}, func(c *Config) { c.Intervals = 4 }},
		{"intervals one per core", 1, func(r *jobconfig.RunConfig) { r.Training.Intervals, r.Backend.CPU = 0, nil },
			func(c *Config) { c.Intervals = runtime.GOMAXPROCS(0) }},
		{"inference", 0, func(r *jobconfig.RunConfig) { r.ParameterServers = jobconfig.ParameterServers{} },
			func(c *Config) { c.Partition, c.ParamServers = 0, nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := runConfig()
			c.edit(rc)
			got, err := FromRunConfig(rc, c.partition)
			if err != nil {
				t.Fatal(err)
			}
			want := base
			want.Peers, want.ParamServers = slices.Clone(base.Peers), slices.Clone(base.ParamServers)
			c.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestFromRunConfigCost prices graph server 0's run from the config's cost section and no
// other partition's.
func TestFromRunConfigCost(t *testing.T) {
	rc := runConfig()
	rc.Cost = &jobconfig.Cost{GraphServerInstance: "c5.xlarge", ParameterServerInstance: "c5.large", BudgetUSD: 3}
	for p, priced := range []bool{true, false} {
		got, err := FromRunConfig(rc, p)
		if err != nil {
			t.Fatal(err)
		}
		if (got.Cost != nil) != priced || (priced && !reflect.DeepEqual(got.Cost, rc.CostRun())) {
			t.Errorf("partition %d: cost %+v, want priced %v as %+v", p, got.Cost, priced, rc.CostRun())
		}
	}
}

// TestFromRunConfigPartition refuses a partition the run config has no graph server for,
// naming the partitions it has.
func TestFromRunConfigPartition(t *testing.T) {
	for _, p := range []int{-1, 2} {
		if _, err := FromRunConfig(runConfig(), p); err == nil || !strings.Contains(err.Error(), "partitions 0..1") {
			t.Errorf("partition %d: %v, want an error naming partitions 0..1", p, err)
		}
	}
}
