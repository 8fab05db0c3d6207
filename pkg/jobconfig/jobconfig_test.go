package jobconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func validConfig() *RunConfig {
	return &RunConfig{
		Version: Version,
		Job:     JobRef{Name: "cora", Namespace: "ml", UID: "u-1"},
		Dataset: Dataset{Source: SourceBuiltin, Name: "cora"},
		Model:   Model{Architecture: ArchitectureGCN, Layers: 2, Hidden: 16, Dropout: 0.5},
		Training: Training{
			Epochs: 200, LearningRate: 0.01, WeightDecay: 5e-4, Staleness: 0, Seed: 1,
		},
		GraphServers: GraphServers{Replicas: 2, Port: GraphServerPort, Peers: []string{
			"cora-gs-0.cora-gs.ml.svc:5000", "cora-gs-1.cora-gs.ml.svc:5000",
		}},
		ParameterServers: ParameterServers{Replicas: 1, Port: ParamServerPort,
			Service: "cora-ps.ml.svc:5100", Shards: []string{"cora-ps-0.cora-ps.ml.svc:5100"}},
		Backend: Backend{Kind: BackendCPU, CPU: &CPU{}},
	}
}

func TestMarshalLoadRoundTrip(t *testing.T) {
	want := validConfig()
	want.Checkpoint = &Checkpoint{IntervalEpochs: 10, Path: "/data/checkpoint/run1"}
	data, err := Marshal(want)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file: got %v, want os.ErrNotExist", err)
	}
}

func TestParseRefusesUnknownFieldsAndVersions(t *testing.T) {
	data, err := Marshal(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	withExtra := strings.Replace(string(data), `"version": 1,`, `"version": 1, "surprise": true,`, 1)
	if _, err := Parse([]byte(withExtra)); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Errorf("unknown field: got %v, want an error naming it", err)
	}
	v2 := strings.Replace(string(data), `"version": 1,`, `"version": 2,`, 1)
	if _, err := Parse([]byte(v2)); !errors.Is(err, ErrVersion) {
		t.Errorf("version 2: got %v, want ErrVersion", err)
	}
	if _, err := Parse(append(data, []byte(`{}`)...)); err == nil {
		t.Error("trailing data: got nil error")
	}
}

func TestValidateNamesTheField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*RunConfig)
		field  string
	}{
		{"no job name", func(c *RunConfig) { c.Job.Name = "" }, "job.name"},
		{"unknown source", func(c *RunConfig) { c.Dataset.Source = "ftp" }, "dataset.source"},
		{"s3 without location", func(c *RunConfig) { c.Dataset = Dataset{Source: SourceS3, Format: FormatPrepared} }, "dataset.s3"},
		{"pvc without path", func(c *RunConfig) { c.Dataset = Dataset{Source: SourcePVC, Format: FormatText} }, "dataset.path"},
		{"bad format", func(c *RunConfig) { c.Dataset = Dataset{Source: SourceHTTP, URL: "http://x", Format: "csv"} }, "dataset.format"},
		{"bad architecture", func(c *RunConfig) { c.Model.Architecture = "MLP" }, "model.architecture"},
		{"dropout one", func(c *RunConfig) { c.Model.Dropout = 1 }, "model.dropout"},
		{"GAT without heads", func(c *RunConfig) { c.Model.Architecture = ArchitectureGAT }, "model.heads"},
		{"GCN with heads", func(c *RunConfig) { c.Model.Heads = 4 }, "model.heads"},
		{"zero epochs", func(c *RunConfig) { c.Training.Epochs = 0 }, "training.epochs"},
		{"zero learning rate", func(c *RunConfig) { c.Training.LearningRate = 0 }, "training.learningRate"},
		{"negative staleness", func(c *RunConfig) { c.Training.Staleness = -1 }, "training.staleness"},
		{"peers mismatch", func(c *RunConfig) { c.GraphServers.Peers = c.GraphServers.Peers[:1] }, "graphServers.peers"},
		{"bad port", func(c *RunConfig) { c.GraphServers.Port = 0 }, "graphServers.port"},
		{"no ps service", func(c *RunConfig) { c.ParameterServers.Service = "" }, "parameterServers.service"},
		{"two backends", func(c *RunConfig) { c.Backend.Lambda = &Lambda{} }, "backend"},
		{"unknown backend", func(c *RunConfig) { c.Backend = Backend{Kind: "gpu", CPU: &CPU{}} }, "backend.kind"},
		{"lambda without region", func(c *RunConfig) {
			c.Backend = Backend{Kind: BackendLambda, Lambda: &Lambda{FunctionName: "f", MemoryMB: 128, MaxConcurrency: 1, DataPath: DataPathPull}}
		}, "backend.lambda.region"},
		{"knative without url", func(c *RunConfig) {
			c.Backend = Backend{Kind: BackendKnative, Knative: &Knative{MaxConcurrency: 1}}
		}, "backend.knative.url"},
		{"checkpoint with two destinations", func(c *RunConfig) {
			c.Checkpoint = &Checkpoint{IntervalEpochs: 1, Path: "/x", S3: &S3{Bucket: "b"}}
		}, "checkpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			tc.mutate(cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate: got %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.field+" ") {
				t.Errorf("Validate: %q does not name field %q", err, tc.field)
			}
		})
	}
}
