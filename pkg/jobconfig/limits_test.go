package jobconfig

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// crdSpec returns the schema of the GNNTrainingJob CRD's spec, as controller-gen wrote it.
func crdSpec(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile("../../config/crd/bases/dorylus.dev_gnntrainingjobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("the CRD: %v", err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("the CRD has %d versions, want 1", len(crd.Spec.Versions))
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
}

// integerFields returns the integer fields of schema s by path ("spec.model.layers"), but those
// of Kubernetes' own types in the pod templates and tolerations, which the API server checks
// when it creates the pods.
func integerFields(path string, s apiextensionsv1.JSONSchemaProps, into map[string]apiextensionsv1.JSONSchemaProps) {
	if strings.HasSuffix(path, ".podTemplate") || strings.HasSuffix(path, ".tolerations") {
		return
	}
	if s.Type == "integer" || s.Type == "number" {
		into[path] = s
	}
	for name, p := range s.Properties {
		integerFields(path+"."+name, p, into)
	}
	if s.Items != nil && s.Items.Schema != nil {
		integerFields(path+"[]", *s.Items.Schema, into)
	}
}

// TestCRDLimits: every integer field of a GNNTrainingJob's spec has a minimum and a maximum
// (but the seed: any int64 seeds), and each that the run config carries has the range of
// Limits, which the dorylus flags and Validate check; the staleness bound's rule says
// Limits.Staleness.
func TestCRDLimits(t *testing.T) {
	spec := crdSpec(t)
	fields := map[string]apiextensionsv1.JSONSchemaProps{}
	integerFields("spec", spec, fields)
	ours := map[string]Range{
		"spec.model.layers":                         Limits.Layers,
		"spec.model.hidden":                         Limits.Hidden,
		"spec.model.heads":                          Limits.Heads,
		"spec.training.epochs":                      Limits.Epochs,
		"spec.training.intervals":                   Limits.Intervals,
		"spec.graphServers.replicas":                Limits.GraphServers,
		"spec.parameterServers.replicas":            Limits.ParameterServers,
		"spec.tensorBackend.cpu.workers":            Limits.Workers,
		"spec.tensorBackend.lambda.memoryMB":        Limits.LambdaMemoryMB,
		"spec.tensorBackend.lambda.maxConcurrency":  Limits.Concurrency,
		"spec.tensorBackend.knative.maxConcurrency": Limits.Concurrency,
		"spec.checkpoint.intervalEpochs":            Limits.CheckpointInterval,
	}
	var paths []string
	for p := range fields {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		s := fields[p]
		if p == "spec.training.seed" {
			continue
		}
		if s.Minimum == nil || s.Maximum == nil {
			t.Errorf("%s: minimum %v, maximum %v: want both", p, s.Minimum, s.Maximum)
			continue
		}
		want, ok := ours[p]
		if !ok {
			continue // the operator's alone (runPolicy, the Knative Service's scale)
		}
		delete(ours, p)
		if got := (Range{int(*s.Minimum), int(*s.Maximum)}); got != want {
			t.Errorf("%s: the CRD's range %v, jobconfig.Limits' %v", p, got, want)
		}
	}
	for p := range ours {
		t.Errorf("%s: not an integer field of the CRD", p)
	}

	st := spec.Properties["training"].Properties["staleness"]
	rule := fmt.Sprintf("self >= %d && self <= %d", Limits.Staleness.Min, Limits.Staleness.Max)
	found := false
	for _, r := range st.XValidations {
		found = found || strings.Contains(r.Rule, rule) && strings.Contains(r.Message, fmt.Sprintf("[%d, %d]", Limits.Staleness.Min, Limits.Staleness.Max))
	}
	if !found {
		t.Errorf("spec.training.staleness: no rule with %q (and its range in the message) among %+v", rule, st.XValidations)
	}
	ue := spec.Properties["training"].Properties["updateEvery"]
	rule = fmt.Sprintf("int(self) <= %d", Limits.UpdateEvery.Max)
	found = false
	for _, r := range ue.XValidations {
		found = found || strings.Contains(r.Rule, rule) && strings.Contains(r.Message, Limits.UpdateEvery.String())
	}
	if !found || Limits.UpdateEvery.Min != 1 {
		t.Errorf("spec.training.updateEvery: no rule with %q (and %v in the message) among %+v", rule, Limits.UpdateEvery, ue.XValidations)
	}
}

// TestValidateRefusesOutOfRange: each setting is refused just outside its range, naming the
// field and the range, and accepted at its ends.
func TestValidateRefusesOutOfRange(t *testing.T) {
	tests := []struct {
		field string
		r     Range
		zero  bool // 0 is the setting's default
		set   func(c *RunConfig, n int)
	}{
		{"model.layers", Limits.Layers, false, func(c *RunConfig, n int) { c.Model.Layers = n }},
		{"model.hidden", Limits.Hidden, false, func(c *RunConfig, n int) { c.Model.Hidden = n }},
		{"model.heads", Limits.Heads, false, func(c *RunConfig, n int) { c.Model.Architecture, c.Model.Heads = ArchitectureGAT, n }},
		{"training.epochs", Limits.Epochs, false, func(c *RunConfig, n int) { c.Training.Epochs = n }},
		{"training.staleness", Limits.Staleness, false, func(c *RunConfig, n int) { c.Training.Staleness = Staleness{bound: n} }},
		{"training.intervals", Limits.Intervals, true, func(c *RunConfig, n int) { c.Training.Intervals = n }},
		{"training.evalEvery", Range{1, Limits.Epochs.Max}, true, func(c *RunConfig, n int) { c.Training.EvalEvery = n }},
		{"graphServers.replicas", Limits.GraphServers, false, func(c *RunConfig, n int) {
			c.GraphServers.Replicas, c.GraphServers.Peers = n, make([]string, max(n, 0))
			for i := range c.GraphServers.Peers {
				c.GraphServers.Peers[i] = "gs"
			}
		}},
		{"parameterServers.replicas", Limits.ParameterServers, false, func(c *RunConfig, n int) {
			c.ParameterServers.Replicas, c.ParameterServers.Shards = n, make([]string, max(n, 0))
			for i := range c.ParameterServers.Shards {
				c.ParameterServers.Shards[i] = "ps"
			}
		}},
		{"backend.cpu.workers", Limits.Workers, true, func(c *RunConfig, n int) { c.Backend.CPU.Workers = n }},
		{"backend.lambda.memoryMB", Limits.LambdaMemoryMB, false, func(c *RunConfig, n int) {
			c.Backend = Backend{Kind: BackendLambda, Lambda: &Lambda{FunctionName: "f", Region: "r", MemoryMB: n, MaxConcurrency: 1, DataPath: DataPathInline}}
		}},
		{"backend.lambda.maxConcurrency", Limits.Concurrency, false, func(c *RunConfig, n int) {
			c.Backend = Backend{Kind: BackendLambda, Lambda: &Lambda{FunctionName: "f", Region: "r", MemoryMB: 128, MaxConcurrency: n, DataPath: DataPathInline}}
		}},
		{"checkpoint.intervalEpochs", Limits.CheckpointInterval, false, func(c *RunConfig, n int) {
			c.Checkpoint = &Checkpoint{IntervalEpochs: n, Path: "/x"}
		}},
	}
	for _, tc := range tests {
		for _, n := range []int{tc.r.Min, tc.r.Max} {
			c := validConfig()
			tc.set(c, n)
			if err := c.Validate(); err != nil {
				t.Errorf("%s %d: %v", tc.field, n, err)
			}
		}
		for _, n := range []int{tc.r.Min - 1, tc.r.Max + 1} {
			if n == 0 && tc.zero {
				n = -1
			}
			c := validConfig()
			tc.set(c, n)
			err := c.Validate()
			if err == nil {
				t.Errorf("%s %d: accepted", tc.field, n)
				continue
			}
			said := strings.Contains(err.Error(), tc.r.String()) || n < 0 && strings.Contains(err.Error(), tc.field+" must not be negative")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field+" must") || !said {
				t.Errorf("%s %d: %v, want ErrInvalid naming the field and %v", tc.field, n, err, tc.r)
			}
		}
	}
	for _, d := range []time.Duration{-time.Second, MinDeadAfter - 1, MaxDeadAfter + 1} {
		c := validConfig()
		c.GraphServers.DeadAfter = Duration(d)
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "graphServers.deadAfter must be") {
			t.Errorf("deadAfter %v: %v, want ErrInvalid naming graphServers.deadAfter", d, err)
		}
	}
}

func TestRangeCheck(t *testing.T) {
	if err := Limits.Hidden.Check("--hidden", 2_000_000); err == nil || err.Error() != "--hidden 2000000: want 1 to 65536" {
		t.Errorf("Check: %v", err)
	}
	if err := Limits.Hidden.Check("--hidden", 65536); err != nil {
		t.Errorf("Check of the maximum: %v", err)
	}
	if err := CheckDuration("--dead-after", 0, MinDeadAfter, MaxDeadAfter); err == nil || err.Error() != "--dead-after 0s: want 1s to 1h0m0s" {
		t.Errorf("CheckDuration: %v", err)
	}
}
