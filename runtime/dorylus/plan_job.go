package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// jobManifest is a GNNTrainingJob manifest that asks for the planner's choice (dorylus plan
// --job): the job as the API reads it, and the manifest as written, to be written back with the
// choice in it and nothing else changed.
type jobManifest struct {
	job     dorylusv1alpha1.GNNTrainingJob
	written map[string]any
}

// readJobManifest reads and checks a GNNTrainingJob manifest: unknown fields are refused.
func readJobManifest(path string) (jobManifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return jobManifest{}, fmt.Errorf("--job: %w", err)
	}
	var m jobManifest
	if err := yaml.UnmarshalStrict(data, &m.job); err != nil {
		return jobManifest{}, fmt.Errorf("--job %s: %w", path, err)
	}
	if gvk := m.job.GroupVersionKind(); gvk != dorylusv1alpha1.GroupVersion.WithKind("GNNTrainingJob") {
		return jobManifest{}, fmt.Errorf("--job %s: apiVersion %q kind %q, want %s GNNTrainingJob", path, m.job.APIVersion, m.job.Kind, dorylusv1alpha1.GroupVersion)
	}
	if err := yaml.Unmarshal(data, &m.written); err != nil {
		return jobManifest{}, fmt.Errorf("--job %s: %w", path, err)
	}
	return m, nil
}

// backend is the plan backend of the job's tensor backend (cpu when unset): the planner keeps
// it, since the manifest holds the settings (function, region, URL) only for that one.
func (m jobManifest) backend() plan.Backend {
	switch tb := m.job.Spec.TensorBackend; {
	case tb != nil && tb.Lambda != nil:
		return plan.Lambda
	case tb != nil && tb.Knative != nil:
		return plan.Knative
	}
	return plan.CPU
}

// applyTo sets the planner's flags the user did not set from the job: its builtin dataset, model,
// epochs, parameter servers, staleness bound, budget and deadline, and its backend alone.
func (m jobManifest) applyTo(o *planOptions, flags *pflag.FlagSet) error {
	spec := m.job.Spec
	set := func(name string) bool { return flags.Changed(name) }
	sized := set("vertices") || set("edges") || set("features") || set("classes")
	switch {
	case set("dataset") || sized:
	case spec.Dataset.Builtin != nil:
		o.dataset = spec.Dataset.Builtin.Name
	default:
		return fmt.Errorf("--job: spec.dataset is not builtin: give --dataset with a local copy or --vertices, --edges, --features and --classes")
	}
	if !set("model") && spec.Model.Architecture != "" {
		if o.model = jobconfig.ModelName(string(spec.Model.Architecture)); o.model == "" {
			return fmt.Errorf("--job: spec.model.architecture %q: want %s, %s or %s", spec.Model.Architecture,
				jobconfig.ArchitectureGCN, jobconfig.ArchitectureGAT, jobconfig.ArchitectureSAGE)
		}
	}
	if !set("layers") && spec.Model.Layers > 0 {
		o.layers = int(spec.Model.Layers)
	}
	if !set("hidden") && spec.Model.Hidden > 0 {
		o.hidden = int(spec.Model.Hidden)
	}
	if !set("heads") && spec.Model.Heads != nil {
		o.heads = int(*spec.Model.Heads)
	}
	if !set("epochs") && spec.Training.Epochs > 0 {
		o.epochs = int(spec.Training.Epochs)
	}
	if !set("param-servers") && spec.ParameterServers.Replicas > 0 {
		o.paramServers = int(spec.ParameterServers.Replicas)
	}
	if !set("budget") && spec.RunPolicy.BudgetUSD != nil {
		b, err := strconv.ParseFloat(string(*spec.RunPolicy.BudgetUSD), 64)
		if err != nil {
			return fmt.Errorf("--job: spec.runPolicy.budgetUSD %q: %w", *spec.RunPolicy.BudgetUSD, err)
		}
		o.budget = b
	}
	if !set("deadline") && spec.RunPolicy.ActiveDeadlineSeconds != nil {
		o.deadline = time.Duration(*spec.RunPolicy.ActiveDeadlineSeconds) * time.Second
	}
	if !set("staleness") {
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
		o.staleness = st
	}
	if !set("update-every") && spec.Training.UpdateEvery != "" {
		u, err := jobconfig.ParseUpdateEvery(spec.Training.UpdateEvery)
		if err != nil {
			return fmt.Errorf("--job: spec.training.updateEvery: %w", err)
		}
		o.updateEvery = u
	}
	if tb := spec.TensorBackend; !set("placement") && tb != nil && tb.Placement == dorylusv1alpha1.PlacementRemote {
		o.placement = jobconfig.PlacementRemote
	}
	b := m.backend()
	if set("backends") && (len(o.backends) != 1 || o.backends[0] != string(b)) {
		return fmt.Errorf("--backends %s with --job: the job's tensor backend is %s, the only one it has the settings of", strings.Join(o.backends, ","), b)
	}
	if set("local") && o.local {
		return fmt.Errorf("--local with --job: a job's servers run on their own nodes")
	}
	o.backends = []string{string(b)}
	return nil
}

// writes reports whether the manifest as written sets the field at path.
func (m jobManifest) writes(path ...string) bool {
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

// withChoice returns the manifest as written with the configuration c in it: graph servers,
// intervals, staleness bound, and the functions' concurrency and memory.
func (m jobManifest) withChoice(c plan.Config) ([]byte, error) {
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

// runPlanJob plans the job of --job: the table to stderr, the manifest with the choice to
// stdout; no configuration meeting the goal is an error.
func runPlanJob(o planOptions, flags *pflag.FlagSet, stdout, stderr io.Writer) error {
	if o.json {
		return fmt.Errorf("--json with --job: the manifest is the output")
	}
	m, err := readJobManifest(o.job)
	if err != nil {
		return err
	}
	if err := m.applyTo(&o, flags); err != nil {
		return err
	}
	in, opts, best, err := o.choose()
	if err != nil {
		return err
	}
	writePlanTable(stderr, in.workload, in.goal, in.cal, best, opts, o.top)
	if !best {
		return fmt.Errorf("no configuration of the job's %s backend meets its goal", m.backend())
	}
	out, err := m.withChoice(opts[0].Config)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
