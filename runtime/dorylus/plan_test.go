package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// runPlanCommand runs dorylus plan with args and returns its standard output.
func runPlanCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newPlanCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestPlanTable(t *testing.T) {
	out, err := runPlanCommand(t, "--vertices", "100000", "--edges", "1000000", "--features", "128", "--classes", "16",
		"--hidden", "64", "--epochs", "100", "--deadline", "1h", "--top", "5")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "100 epochs within 1h0m0s, 100000 vertices, 2000000 directed edges") || len(lines) != 9 {
		t.Errorf("table:\n%s", out)
	}
	if !strings.HasPrefix(strings.TrimSpace(lines[3]), "*") {
		t.Errorf("the first row is not marked as the choice:\n%s", out)
	}
}

func TestPlanJSON(t *testing.T) {
	out, err := runPlanCommand(t, "--dataset", "cora", "--local", "--cores", "2", "--backends", "cpu",
		"--graph-servers", "1,2", "--intervals", "4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep planReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Options) != 2 || !rep.Best || rep.Workload.Vertices != 2708 || len(rep.Workload.Cuts) != 2 {
		t.Errorf("report: %d options, best %v, workload %+v", len(rep.Options), rep.Best, rep.Workload)
	}
	if two := rep.Workload.Cuts[2]; two.Ghosts < 1 || two.Vertices < 2708/2 {
		t.Errorf("the heaviest of 2 parts of cora: %+v", two)
	}
}

func TestPlanFlagErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "cal.json")
	if err := os.WriteFile(bad, []byte(`{"measured": "2026-12-05", "command": "x", "gatherSecondsPerMAC": 1, "featureSecondsPerMAC": 1, "flopSeconds": 1, "bytesPerSecond": 1, "elementSeconds": -1, "featureElementSeconds": 0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	size := []string{"--vertices", "1000", "--edges", "5000", "--features", "8", "--classes", "2"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"dataset and size":   {append([]string{"--dataset", "cora"}, size...), "give the dataset or its size"},
		"no size":            {nil, "want at least one vertex"},
		"backend":            {append([]string{"--backends", "gpu"}, size...), `backend "gpu"`},
		"graph servers":      {append([]string{"--graph-servers", "0"}, size...), "graph servers [0]"},
		"objective":          {append([]string{"--objective", "speed"}, size...), `objective "speed"`},
		"budget":             {append([]string{"--budget", "-1"}, size...), "no negative limit"},
		"model":              {append([]string{"--model", "mlp"}, size...), `model "mlp"`},
		"calibration":        {append([]string{"--calibration", bad}, size...), "elementSeconds -1"},
		"cores":              {append([]string{"--local", "--cores", "0"}, size...), "--cores 0"},
		"negative staleness": {append([]string{"--staleness", "-1"}, size...), `staleness "-1": want sync or a bound`},
		"sync staleness":     {append([]string{"--staleness", "sync"}, size...), "the synchronous mode is not modelled"},
	} {
		_, err := runPlanCommand(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
	}
}

func TestHeaviestPart(t *testing.T) {
	// 2 parts of 100 vertices and 400 entries: the heaviest weighs 1.1 of the mean
	// (500/2·1.1 = 275 entries + rows), holds 1.2 of the mean's 50 vertices, and 1.1 of the mean's
	// 15 ghosts, rounded up.
	q := plan.Part{Vertices: 60, Entries: 275, Ghosts: 17}
	if got := heaviestPart(partition.Quality{Parts: 2, Entries: 400, Balance: 1.1, VertexBalance: 1.2, Ghosts: 30}, 100); got != q {
		t.Errorf("heaviestPart = %+v, want %+v", got, q)
	}
}

// planJob runs dorylus plan --job with a manifest of spec and returns the job it prints.
func planJob(t *testing.T, spec string, args ...string) (job dorylusv1alpha1.GNNTrainingJob, table string, err error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.yaml")
	manifest := "apiVersion: dorylus.dev/v1alpha1\nkind: GNNTrainingJob\nmetadata:\n  name: planned\nspec:\n" + spec
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newPlanCommand()
	var out, tbl bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&tbl)
	cmd.SetArgs(append([]string{"--job", path}, args...))
	if err := cmd.Execute(); err != nil {
		return job, "", err
	}
	if !strings.Contains(tbl.String(), "* the choice") {
		t.Errorf("no table on standard error:\n%s", tbl.String())
	}
	return job, tbl.String(), yaml.UnmarshalStrict(out.Bytes(), &job)
}

// planChoice returns the configuration dorylus plan --json chooses with args.
func planChoice(t *testing.T, args ...string) plan.Config {
	t.Helper()
	out, err := runPlanCommand(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rep planReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Best {
		t.Fatalf("no configuration meets the goal of %v", args)
	}
	return rep.Options[0].Config
}

func TestPlanJob(t *testing.T) {
	space := []string{"--graph-servers", "1,2", "--intervals", "1,4"}
	cpu := "  dataset: {builtin: {name: cora}}\n  model: {architecture: GCN, hidden: 32}\n  training: {epochs: 300, staleness: 1, learningRate: \"0.02\"}\n" +
		"  runPolicy: {activeDeadlineSeconds: 600}\n"
	job, _, err := planJob(t, cpu, space...)
	if err != nil {
		t.Fatal(err)
	}
	want := planChoice(t, append(space, "--dataset", "cora", "--backends", "cpu", "--hidden", "32", "--epochs", "300", "--deadline", "10m")...)
	s := job.Spec
	if job.Name != "planned" || s.Dataset.Builtin.Name != "cora" || s.Training.LearningRate != "0.02" || s.Model.Hidden != 32 ||
		int(s.GraphServers.Replicas) != want.GraphServers || s.Training.Intervals == nil || int(*s.Training.Intervals) != want.Intervals ||
		s.Training.Staleness.IntValue() != 1 || s.TensorBackend != nil {
		t.Errorf("planned job %+v, want the manifest with %v", s, want)
	}

	lambda := "  dataset: {s3: {bucket: b, prefix: p/, region: us-east-1}, format: Prepared}\n" +
		"  tensorBackend: {lambda: {functionName: f, region: us-east-1, credentials: {roleARN: arn:aws:iam::1:role/r}}}\n"
	size := []string{"--vertices", "100000", "--edges", "1000000", "--features", "64", "--classes", "8", "--budget", "1"}
	job, _, err = planJob(t, lambda, append(append(space, size...), "--staleness", "0")...)
	if err != nil {
		t.Fatal(err)
	}
	want = planChoice(t, append(append(space, size...), "--staleness", "0", "--backends", "lambda")...)
	l := job.Spec.TensorBackend.Lambda
	if l.FunctionName != "f" || int(l.MaxConcurrency) != want.Concurrency || int(l.MemoryMB) != want.MemoryMB ||
		int(job.Spec.GraphServers.Replicas) != want.GraphServers || job.Spec.Training.Staleness.IntValue() != 0 {
		t.Errorf("planned lambda job %+v %+v, want %v", job.Spec, l, want)
	}

	for name, tc := range map[string]struct {
		spec string
		args []string
		want string
	}{
		"architecture":  {"  dataset: {builtin: {name: cora}}\n  model: {architecture: MLP}\n  training: {staleness: 1}\n", nil, `spec.model.architecture "MLP": want GCN, GAT or GraphSAGE`},
		"sync":          {"  dataset: {builtin: {name: cora}}\n", nil, "spec.training.staleness is sync"},
		"not builtin":   {lambda, []string{"--staleness", "1"}, "spec.dataset is not builtin"},
		"unknown field": {cpu + "  graphServer: {replicas: 2}\n", nil, `unknown field "graphServer"`},
		"other backend": {cpu, []string{"--backends", "lambda"}, "the job's tensor backend is cpu"},
		"local":         {cpu, []string{"--local"}, "--local with --job"},
		"json":          {cpu, []string{"--json"}, "--json with --job"},
		"goal":          {cpu, []string{"--deadline", "1ms"}, "no configuration of the job's cpu backend meets its goal"},
	} {
		if _, _, err := planJob(t, tc.spec, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
	}
}

// GraphSAGE plans as a GCN of twice the tensor work: on Cora each configuration's epoch is
// longer and its graph server larger, and each tensor task is two calls (on the cpu backend
// too: two ops a graph server runs); a job of
// spec.model.architecture GraphSAGE plans a sage.
func TestPlanSAGE(t *testing.T) {
	report := func(args ...string) planReport {
		out, err := runPlanCommand(t, append([]string{"--dataset", "cora", "--local", "--cores", "2", "--graph-servers", "1,2", "--intervals", "4",
			"--backends", "cpu,lambda", "--memory-mb", "3008", "--concurrency-per-interval", "1", "--json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var rep planReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	gcn, sage := report(), report("--model", "sage")
	if sage.Workload.Model.Architecture != plan.SAGE || len(sage.Options) != len(gcn.Options) || len(gcn.Options) != 4 {
		t.Fatalf("sage: model %v, %d options; gcn %d, want 4 each", sage.Workload.Model, len(sage.Options), len(gcn.Options))
	}
	byConfig := map[plan.Config]plan.Option{}
	for _, o := range gcn.Options {
		byConfig[o.Config] = o
	}
	for _, s := range sage.Options {
		g := byConfig[s.Config]
		if calls := 2 * g.Prediction.Calls; s.Prediction.EpochSeconds <= g.Prediction.EpochSeconds || s.GraphServerBytes <= g.GraphServerBytes || s.Prediction.Calls != calls {
			t.Errorf("%s: sage epoch %v s, %v bytes, %v calls; gcn %v s, %v bytes, %v calls: want a longer epoch, more bytes and twice the calls",
				s.Config, s.Prediction.EpochSeconds, s.GraphServerBytes, s.Prediction.Calls, g.Prediction.EpochSeconds, g.GraphServerBytes, g.Prediction.Calls)
		}
	}
	job, table, err := planJob(t, "  dataset: {builtin: {name: cora}}\n  model: {architecture: GraphSAGE}\n  training: {epochs: 10, staleness: 1}\n", "--intervals", "4")
	if err != nil {
		t.Fatal(err)
	}
	if job.Spec.Model.Architecture != "GraphSAGE" || !strings.Contains(table, "; sage 2 layers, 16 hidden;") {
		t.Errorf("GraphSAGE job: architecture %q, table:\n%s", job.Spec.Model.Architecture, table)
	}
}

// parseCPUTimes reads /proc/stat's first line: idle and iowait are not busy, a malformed line
// is not read.
func TestParseCPUTimes(t *testing.T) {
	busy, total, ok := parseCPUTimes([]byte("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n"))
	if !ok || busy != 160 || total != 1000 {
		t.Errorf("busy %d, total %d, ok %v: want 160, 1000, true", busy, total, ok)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5", "cpu 1 2 x 4 5", "cpu 1 2 3"} {
		if _, _, ok := parseCPUTimes([]byte(bad)); ok {
			t.Errorf("%q read as CPU times", bad)
		}
	}
}

// TestPlanUpdateEvery: dorylus plan --update-every models the run's update granularity: at 8
// intervals, one update per graph server per epoch puts an eighth of the per-interval updates'
// weight round trips on an interval's chain, and the choice carries the granularity; a job's
// spec.training.updateEvery is the plan's unless the flag is given; a bad one is refused.
func TestPlanUpdateEvery(t *testing.T) {
	space := []string{"--dataset", "cora", "--backends", "cpu", "--graph-servers", "2", "--intervals", "8"}
	gate := func(args ...string) (plan.Config, float64) {
		out, err := runPlanCommand(t, append(append(args, space...), "--json")...)
		if err != nil {
			t.Fatal(err)
		}
		var rep planReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Options[0].Config, rep.Options[0].Prediction.GateSeconds
	}
	epoch, g1 := gate()
	interval, g8 := gate("--update-every", "interval")
	if epoch.UpdateEvery != (jobconfig.UpdateEvery{}) || interval.UpdateEvery != jobconfig.UpdateIntervals(1) || !(g1 > 0) || math.Abs(g8/g1-8) > 1e-9 {
		t.Errorf("gate %.3g s with %v, %.3g s with %v: want the default, interval, and 8 times the round trips", g1, epoch, g8, interval)
	}
	if _, err := runPlanCommand(t, append(space, "--update-every", "0")...); err == nil || !strings.Contains(err.Error(), `update every "0": want`) {
		t.Errorf("--update-every 0: %v, want it refused", err)
	}
	spec := "  dataset: {builtin: {name: cora}}\n  training: {epochs: 100, staleness: 1, updateEvery: \"4\"}\n"
	_, table, err := planJob(t, spec, "--graph-servers", "2", "--intervals", "8")
	if err != nil || !strings.Contains(table, "updates=4") {
		t.Errorf("the job's update every 4 intervals: %v, table:\n%s", err, table)
	}
}
