package jobfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

const header = "apiVersion: dorylus.dev/v1alpha1\nkind: GNNTrainingJob\nmetadata: {name: planned}\nspec:\n"

// readJob writes spec under a GNNTrainingJob's header and reads it.
func readJob(t *testing.T, spec string) (Job, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(header+spec), 0o600); err != nil {
		t.Fatal(err)
	}
	return Read(path)
}

// flags is a set of flag names the user gave.
func flags(names ...string) func(string) bool {
	return func(n string) bool {
		for _, m := range names {
			if m == n {
				return true
			}
		}
		return false
	}
}

// TestApply sets every input a job holds where its flag was not given, and none where it was.
func TestApply(t *testing.T) {
	m, err := readJob(t, "  dataset: {builtin: {name: citeseer}}\n  model: {architecture: GAT, layers: 3, hidden: 8, heads: 4}\n"+
		"  training: {epochs: 300, staleness: 2, updateEvery: interval}\n  parameterServers: {replicas: 3}\n"+
		"  runPolicy: {activeDeadlineSeconds: 600, budgetUSD: \"1.5\"}\n  tensorBackend: {placement: Remote}\n")
	if err != nil {
		t.Fatal(err)
	}
	var in Inputs
	if err := m.Apply(&in, flags()); err != nil {
		t.Fatal(err)
	}
	want := Inputs{Dataset: "citeseer", Model: "gat", Layers: 3, Hidden: 8, Heads: 4, Epochs: 300, ParamServers: 3,
		Budget: 1.5, Deadline: 10 * time.Minute, Staleness: jobconfig.Bounded(2), UpdateEvery: jobconfig.UpdateIntervals(1), Placement: jobconfig.PlacementRemote}
	if in != want {
		t.Errorf("from the job: %+v, want %+v", in, want)
	}
	given := Inputs{Dataset: "cora", Model: "gcn", Layers: 2, Hidden: 16, Heads: 1, Epochs: 5, ParamServers: 1,
		Budget: 9, Deadline: time.Hour, Staleness: jobconfig.Bounded(0), UpdateEvery: jobconfig.UpdateIntervals(4), Placement: jobconfig.PlacementAuto}
	in = given
	if err := m.Apply(&in, flags("dataset", "model", "layers", "hidden", "heads", "epochs", "param-servers",
		"budget", "deadline", "staleness", "update-every", "placement")); err != nil {
		t.Fatal(err)
	}
	if in != given {
		t.Errorf("every flag given: %+v, want %+v", in, given)
	}
	if m.Backend() != plan.CPU {
		t.Errorf("backend %s, want cpu", m.Backend())
	}
}

// TestApplyRefuses: a dataset that is not builtin without sizes, an unknown model, a sync or
// unset staleness and a bad budget are refused naming the field; sizes stand in for the
// dataset and --staleness for a sync job.
func TestApplyRefuses(t *testing.T) {
	s3 := "  dataset: {s3: {bucket: b, prefix: p/, region: us-east-1}, format: Prepared}\n  training: {staleness: 1}\n"
	for _, c := range []struct{ spec, want string }{
		{s3, "spec.dataset is not builtin"},
		{"  dataset: {builtin: {name: cora}}\n  model: {architecture: MLP}\n  training: {staleness: 1}\n", `spec.model.architecture "MLP"`},
		{"  dataset: {builtin: {name: cora}}\n", "spec.training.staleness is sync"},
		{"  dataset: {builtin: {name: cora}}\n  training: {staleness: sync}\n", "spec.training.staleness is sync"},
	} {
		m, err := readJob(t, c.spec)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if err := m.Apply(&Inputs{}, flags()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.spec, err, c.want)
		}
	}
	m, err := readJob(t, s3)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(&Inputs{}, flags("vertices", "edges", "features", "classes")); err != nil {
		t.Errorf("sizes given: %v", err)
	}
	if m, err = readJob(t, "  dataset: {builtin: {name: cora}}\n"); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(&Inputs{}, flags("staleness")); err != nil {
		t.Errorf("--staleness given: %v", err)
	}
}

// TestRead refuses an unknown field and another kind, naming the file.
func TestRead(t *testing.T) {
	if _, err := readJob(t, "  dataset: {builtin: {name: cora}}\n  graphServer: {replicas: 2}\n"); err == nil || !strings.Contains(err.Error(), `unknown field "graphServer"`) {
		t.Errorf("unknown field: %v", err)
	}
	path := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `kind "Pod"`) {
		t.Errorf("a Pod: %v", err)
	}
}

// TestWithChoice writes the choice into the manifest as written and leaves every other field
// as it was, the functions' settings included.
func TestWithChoice(t *testing.T) {
	m, err := readJob(t, "  dataset: {builtin: {name: cora}}\n  training: {epochs: 300, staleness: 1, learningRate: \"0.02\"}\n"+
		"  tensorBackend: {lambda: {functionName: f, region: us-east-1, credentials: {roleARN: arn:aws:iam::1:role/r}}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if m.Backend() != plan.Lambda {
		t.Fatalf("backend %s, want lambda", m.Backend())
	}
	out, err := m.WithChoice(plan.Config{Backend: plan.Lambda, GraphServers: 3, Intervals: 8, Staleness: jobconfig.Bounded(2), Concurrency: 40, MemoryMB: 3008})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	spec := got["spec"].(map[string]any)
	training := spec["training"].(map[string]any)
	lambda := spec["tensorBackend"].(map[string]any)["lambda"].(map[string]any)
	if spec["graphServers"].(map[string]any)["replicas"] != 3.0 || training["intervals"] != 8.0 || training["staleness"] != 2.0 ||
		training["epochs"] != 300.0 || training["learningRate"] != "0.02" || lambda["maxConcurrency"] != 40.0 || lambda["memoryMB"] != 3008.0 ||
		lambda["functionName"] != "f" || got["metadata"].(map[string]any)["name"] != "planned" {
		t.Errorf("manifest with the choice:\n%s", out)
	}
}
