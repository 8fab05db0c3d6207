// Package jobfile reads a GNNTrainingJob manifest that asks for the planner's choice
// (dorylus plan --job), says which of the planner's inputs it sets (Job.Apply), and writes it
// back with the chosen configuration in it and nothing else changed (Job.WithChoice). Its
// errors name the planner's flags, since the job stands in for them.
package jobfile

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// Job is a GNNTrainingJob manifest: the job as the API reads it, and the manifest as written,
// to be written back with the choice in it and nothing else changed.
type Job struct {
	job     dorylusv1alpha1.GNNTrainingJob
	written map[string]any
}

// Read reads and checks a GNNTrainingJob manifest: unknown fields are refused.
func Read(path string) (Job, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Job{}, fmt.Errorf("--job: %w", err)
	}
	var m Job
	if err := yaml.UnmarshalStrict(data, &m.job); err != nil {
		return Job{}, fmt.Errorf("--job %s: %w", path, err)
	}
	if gvk := m.job.GroupVersionKind(); gvk != dorylusv1alpha1.GroupVersion.WithKind("GNNTrainingJob") {
		return Job{}, fmt.Errorf("--job %s: apiVersion %q kind %q, want %s GNNTrainingJob", path, m.job.APIVersion, m.job.Kind, dorylusv1alpha1.GroupVersion)
	}
	if err := yaml.Unmarshal(data, &m.written); err != nil {
		return Job{}, fmt.Errorf("--job %s: %w", path, err)
	}
	return m, nil
}

// Backend is the plan backend of the job's tensor backend (cpu when unset): the planner keeps
// it, since the manifest holds the settings (function, region, URL) only for that one.
func (m Job) Backend() plan.Backend {
	switch tb := m.job.Spec.TensorBackend; {
	case tb != nil && tb.Lambda != nil:
		return plan.Lambda
	case tb != nil && tb.Knative != nil:
		return plan.Knative
	}
	return plan.CPU
}

// Inputs are the planner's inputs a job can set, each under the name of its flag of dorylus
// plan.
type Inputs struct {
	Dataset      string // --dataset: a builtin dataset's name
	Model        string // --model: gcn, gat or sage
	Layers       int    // --layers
	Hidden       int    // --hidden
	Heads        int    // --heads
	Epochs       int    // --epochs
	ParamServers int    // --param-servers
	Budget       float64
	Deadline     time.Duration
	Staleness    jobconfig.Staleness
	UpdateEvery  jobconfig.UpdateEvery
	Placement    string // --placement: jobconfig.PlacementAuto or PlacementRemote
}

// Apply sets in from the job where given (which says whether the user set a flag, by its name)
// is false: the job's builtin dataset (unless the dataset or its sizes were given), model,
// epochs, parameter servers, staleness bound, update granularity, placement, budget and deadline. A job
// whose dataset is not builtin, whose model is unknown or whose staleness is sync (which the
// planner does not model) is refused unless the flags stand in for it.
func (m Job) Apply(in *Inputs, given func(flag string) bool) error {
	spec := m.job.Spec
	sized := given("vertices") || given("edges") || given("features") || given("classes")
	switch {
	case given("dataset") || sized:
	case spec.Dataset.Builtin != nil:
		in.Dataset = spec.Dataset.Builtin.Name
	default:
		return fmt.Errorf("--job: spec.dataset is not builtin: give --dataset with a local copy or --vertices, --edges, --features and --classes")
	}
	if !given("model") && spec.Model.Architecture != "" {
		if in.Model = jobconfig.ModelName(string(spec.Model.Architecture)); in.Model == "" {
			return fmt.Errorf("--job: spec.model.architecture %q: want %s, %s or %s", spec.Model.Architecture,
				jobconfig.ArchitectureGCN, jobconfig.ArchitectureGAT, jobconfig.ArchitectureSAGE)
		}
	}
	if !given("layers") && spec.Model.Layers > 0 {
		in.Layers = int(spec.Model.Layers)
	}
	if !given("hidden") && spec.Model.Hidden > 0 {
		in.Hidden = int(spec.Model.Hidden)
	}
	if !given("heads") && spec.Model.Heads != nil {
		in.Heads = int(*spec.Model.Heads)
	}
	if !given("epochs") && spec.Training.Epochs > 0 {
		in.Epochs = int(spec.Training.Epochs)
	}
	if !given("param-servers") && spec.ParameterServers.Replicas > 0 {
		in.ParamServers = int(spec.ParameterServers.Replicas)
	}
	if !given("budget") && spec.RunPolicy.BudgetUSD != nil {
		b, err := strconv.ParseFloat(string(*spec.RunPolicy.BudgetUSD), 64)
		if err != nil {
			return fmt.Errorf("--job: spec.runPolicy.budgetUSD %q: %w", *spec.RunPolicy.BudgetUSD, err)
		}
		in.Budget = b
	}
	if !given("deadline") && spec.RunPolicy.ActiveDeadlineSeconds != nil {
		in.Deadline = time.Duration(*spec.RunPolicy.ActiveDeadlineSeconds) * time.Second
	}
	if !given("staleness") {
		// Unset, staleness is the "sync" the API server defaults it to.
		st := jobconfig.MustParseStaleness(jobconfig.DefaultStaleness)
		if m.writes("spec", "training", "staleness") {
			var err error
			if st, err = jobconfig.ParseStaleness(spec.Training.Staleness.String()); err != nil {
				return fmt.Errorf("--job: spec.training.staleness: %w", err)
			}
		}
		if st.Sync() {
			return fmt.Errorf("--job: spec.training.staleness is sync (its default), which the planner does not model: give --staleness S, and the plan writes it into the job")
		}
		in.Staleness = st
	}
	if !given("update-every") && spec.Training.UpdateEvery != "" {
		u, err := jobconfig.ParseUpdateEvery(spec.Training.UpdateEvery)
		if err != nil {
			return fmt.Errorf("--job: spec.training.updateEvery: %w", err)
		}
		in.UpdateEvery = u
	}
	if tb := spec.TensorBackend; !given("placement") && tb != nil && tb.Placement == dorylusv1alpha1.PlacementRemote {
		in.Placement = jobconfig.PlacementRemote
	}
	return nil
}

// writes reports whether the manifest as written sets the field at path.
func (m Job) writes(path ...string) bool {
	obj := m.written
	for _, name := range path[:len(path)-1] {
		var ok bool
		if obj, ok = obj[name].(map[string]any); !ok {
			return false
		}
	}
	_, ok := obj[path[len(path)-1]]
	return ok
}

// WithChoice returns the manifest as written with the configuration c in it: graph servers,
// intervals, staleness bound, and the functions' concurrency and memory.
func (m Job) WithChoice(c plan.Config) ([]byte, error) {
	spec, ok := m.written["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("--job: no spec")
	}
	field := func(parent map[string]any, name string) map[string]any {
		child, ok := parent[name].(map[string]any)
		if !ok {
			child = map[string]any{}
			parent[name] = child
		}
		return child
	}
	field(spec, "graphServers")["replicas"] = c.GraphServers
	training := field(spec, "training")
	training["intervals"] = c.Intervals
	training["staleness"] = c.Staleness
	switch c.Backend {
	case plan.Lambda:
		lambda := field(field(spec, "tensorBackend"), "lambda")
		lambda["maxConcurrency"] = c.Concurrency
		lambda["memoryMB"] = c.MemoryMB
	case plan.Knative:
		field(field(spec, "tensorBackend"), "knative")["maxConcurrency"] = c.Concurrency
	}
	return yaml.Marshal(m.written)
}
