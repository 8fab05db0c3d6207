package jobconfig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func validConfig() *RunConfig {
	return &RunConfig{
		Version: Version,
		Job:     JobRef{Name: "cora", Namespace: "ml", UID: "u-1"},
		Dataset: Dataset{Source: SourceBuiltin, Name: "cora"},
		Model:   Model{Architecture: ArchitectureGCN, Layers: 2, Hidden: 16, Dropout: 0.5},
		Training: Training{
			Epochs: 200, LearningRate: 0.01, WeightDecay: 5e-4, Seed: 1,
		},
		GraphServers: GraphServers{Replicas: 2, Port: GraphServerPort, Peers: []string{
			"cora-gs-0.cora-gs.ml.svc:5000", "cora-gs-1.cora-gs.ml.svc:5000",
		}},
		ParameterServers: ParameterServers{Replicas: 1, Port: ParamServerPort,
			Service: "cora-ps.ml.svc:5100", Shards: []string{"cora-ps-0.cora-ps.ml.svc:5100"}},
		Backend:  Backend{Kind: BackendCPU, CPU: &CPU{}},
		Security: Security{TLSDir: CredentialsDir},
	}
}

func TestMarshalLoadRoundTrip(t *testing.T) {
	want := validConfig()
	want.Checkpoint = &Checkpoint{IntervalEpochs: 10, RunID: "6d1f", Path: "/data/checkpoint/" + RunFolder("6d1f")}
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
		{"negative staleness", func(c *RunConfig) { c.Training.Staleness.bound = -1 }, "training.staleness"},
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
		{"neither TLS nor insecure", func(c *RunConfig) { c.Security = Security{} }, "security must set exactly one of tlsDir,"},
		{"TLS and insecure", func(c *RunConfig) { c.Security.Insecure = true }, "security must set exactly one of tlsDir,"},
		{"knative without token", func(c *RunConfig) {
			c.Backend = Backend{Kind: BackendKnative, Knative: &Knative{URL: "http://fn", MaxConcurrency: 1}}
		}, "backend.knative.tokenFile is required unless"},
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

func TestStaleness(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Staleness
	}{{"sync", Sync}, {"0", Staleness{}}, {"3", Bounded(3)}} {
		got, err := ParseStaleness(tc.in)
		if err != nil || got != tc.want || got.String() != tc.in {
			t.Errorf("ParseStaleness(%q) = %+v (%q), %v; want %+v", tc.in, got, got.String(), err, tc.want)
		}
	}
	for _, bad := range []string{"", "-1", "async", "1.5"} {
		if _, err := ParseStaleness(bad); err == nil || !strings.Contains(err.Error(), "want sync or a bound") {
			t.Errorf("ParseStaleness(%q): %v, want an error", bad, err)
		}
	}
	if MustParseStaleness(DefaultStaleness) != Sync {
		t.Errorf("default staleness %q is not synchronous", DefaultStaleness)
	}
}

// TestStalenessOf: the two fields of the wire forms make a staleness only when they agree; a
// staleness is "sync" or the number S in JSON, as the CRD spells it.
func TestStalenessOf(t *testing.T) {
	for _, tc := range []struct {
		sync  bool
		bound int
		want  Staleness
		err   string
	}{{true, 0, Sync, ""}, {false, 0, Staleness{}, ""}, {false, 2, Bounded(2), ""},
		{true, 1, Staleness{}, "must be 0 with sync, got 1"}, {false, -1, Staleness{}, "must not be negative, got -1"}} {
		got, err := StalenessOf(tc.sync, tc.bound)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("StalenessOf(%v, %d) = %v, %v; want %v, %q", tc.sync, tc.bound, got, err, tc.want, tc.err)
		}
		if err == nil && (got.Sync() != tc.sync || got.Bound() != tc.bound) {
			t.Errorf("StalenessOf(%v, %d) reads back as %v, %d", tc.sync, tc.bound, got.Sync(), got.Bound())
		}
	}
	for _, tc := range []struct {
		st   Staleness
		json string
	}{{Sync, `"sync"`}, {Bounded(0), `0`}, {Bounded(3), `3`}} {
		data, err := json.Marshal(tc.st)
		var back Staleness
		if err != nil || string(data) != tc.json || json.Unmarshal(data, &back) != nil || back != tc.st {
			t.Errorf("%v in JSON: %s, %v; read back as %v; want %s", tc.st, data, err, back, tc.json)
		}
	}
	for _, bad := range []string{`-1`, `"async"`, `1.5`, `true`} {
		var st Staleness
		if err := json.Unmarshal([]byte(bad), &st); err == nil {
			t.Errorf("staleness %s read as %v, want an error", bad, st)
		}
	}
}

// TestStalenessWireForm: the staleness travels as the two fields the operator has always
// written, and a config of an older operator reads the same.
func TestStalenessWireForm(t *testing.T) {
	c := validConfig()
	c.Training.Staleness = Bounded(2)
	data, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"sync": false`) || !strings.Contains(string(data), `"staleness": 2`) {
		t.Fatalf("wire form of S = 2:\n%s", data)
	}
	sync := strings.Replace(strings.Replace(string(data), `"sync": false`, `"sync": true`, 1), `"staleness": 2`, `"staleness": 0`, 1)
	got, err := Parse([]byte(sync))
	if err != nil || got.Training.Staleness != Sync {
		t.Fatalf("sync wire form read as %+v, %v", got.Training.Staleness, err)
	}
	extra := strings.Replace(string(data), `"staleness": 2`, `"staleness": 2, "stale": 1`, 1)
	if _, err := Parse([]byte(extra)); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("unknown field in training: %v, want an error naming it", err)
	}
	bad := strings.Replace(sync, `"staleness": 0`, `"staleness": 1`, 1)
	if _, err := Parse([]byte(bad)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "training.staleness") {
		t.Errorf("sync with S = 1: %v, want ErrInvalid naming training.staleness", err)
	}
	negative := strings.Replace(string(data), `"staleness": 2`, `"staleness": -1`, 1)
	if _, err := Parse([]byte(negative)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "training.staleness") {
		t.Errorf("S = -1: %v, want ErrInvalid naming training.staleness", err)
	}
}

func TestDurationRoundTrip(t *testing.T) {
	c := validConfig()
	c.GraphServers.DeadAfter = Duration(1500 * time.Millisecond)
	c.Backend.CPU.InjectLatency = Duration(20 * time.Millisecond)
	data, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"deadAfter": "1.5s"`) || !strings.Contains(string(data), `"injectLatency": "20ms"`) {
		t.Fatalf("durations not written as Go durations:\n%s", data)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, err := Parse([]byte(strings.Replace(string(data), `"1.5s"`, `"soon"`, 1))); err == nil {
		t.Error("a bad duration is accepted")
	}
}

// TestCRDDefaults: the GNNTrainingJob CRD defaults spec.training.staleness and
// spec.tensorBackend.lambda.dataPath to the same values as dorylus train (DefaultStaleness,
// DataPathInline).
func TestCRDDefaults(t *testing.T) {
	data, err := os.ReadFile("../../config/crd/bases/dorylus.dev_gnntrainingjobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ field, want string }{
		{"\n                  staleness:\n", DefaultStaleness},
		{"\n                      dataPath:\n", "Inline"},
	} {
		_, rest, ok := strings.Cut(string(data), f.field)
		if !ok {
			t.Fatalf("no %q in the CRD", f.field)
		}
		rest, _, _ = strings.Cut(rest, "description:")
		if want := "default: " + f.want + "\n"; !strings.Contains(rest, want) {
			t.Errorf("the CRD's schema of %q has %q, no %q", f.field, rest, want)
		}
	}
	if !strings.EqualFold("Inline", DataPathInline) {
		t.Errorf("the CRD's Inline is not the run config's %q", DataPathInline)
	}
}
