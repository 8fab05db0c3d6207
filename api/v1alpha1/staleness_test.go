package v1alpha1

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// trainingSchema returns the CRD's schema of spec.training, as controller-gen wrote it.
func trainingSchema(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile("../../config/crd/bases/dorylus.dev_gnntrainingjobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["training"]
}

// ruleCase is a value of self and whether a rule admits it.
type ruleCase struct {
	self  any
	admit bool
}

// checkRule evaluates the only rule of rules, as the API server evaluates it, on every case, and
// checks that its message names want.
func checkRule(t *testing.T, field string, rules apiextensionsv1.ValidationRules, want string, cases []ruleCase) {
	t.Helper()
	if len(rules) != 1 {
		t.Fatalf("%s has %d rules, want 1", field, len(rules))
	}
	if !strings.Contains(rules[0].Message, want) {
		t.Errorf("%s: the rule's message %q does not name %s", field, rules[0].Message, want)
	}
	env, err := cel.NewEnv(cel.Variable("self", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(rules[0].Rule)
	if iss.Err() != nil {
		t.Fatalf("rule %q: %v", rules[0].Rule, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		out, _, err := prg.Eval(map[string]any{"self": tc.self})
		if err != nil || out.Value() != tc.admit {
			t.Errorf("%s: rule %q on %v: %v, %v; want %v", field, rules[0].Rule, tc.self, out, err, tc.admit)
		}
	}
}

// TestStalenessBound: the CRD's rule on spec.training.staleness, evaluated as the API server
// evaluates it, admits "sync" and exactly the bounds 0 … jobconfig.MaxStaleness, and its
// message names that range.
func TestStalenessBound(t *testing.T) {
	checkRule(t, "spec.training.staleness", trainingSchema(t).Properties["staleness"].XValidations, fmt.Sprintf("[0, %d]", jobconfig.MaxStaleness),
		[]ruleCase{{jobconfig.SyncStaleness, true}, {"fast", false}, {int64(-1), false}, {int64(0), true},
			{int64(jobconfig.MaxStaleness), true}, {int64(jobconfig.MaxStaleness + 1), false}})
}

// TestUpdateEveryRules: the CRD's rule on spec.training.updateEvery admits exactly what
// jobconfig.ParseUpdateEvery reads (epoch, interval, 1 … 65536), and the rule on
// spec.training refuses it with a synchronous staleness, the default one included.
func TestUpdateEveryRules(t *testing.T) {
	training := trainingSchema(t)
	var cases []ruleCase
	for _, s := range []string{"epoch", "interval", "1", "8", "65536", "65537", "0", "01", "-1", "1.5", "epochs", "", "99999"} {
		_, err := jobconfig.ParseUpdateEvery(s)
		cases = append(cases, ruleCase{s, err == nil})
	}
	checkRule(t, "spec.training.updateEvery", training.Properties["updateEvery"].XValidations, jobconfig.Limits.UpdateEvery.String(), cases)
	// spec.training after defaulting: staleness is always set.
	checkRule(t, "spec.training", training.XValidations, "needs an asynchronous staleness", []ruleCase{
		{map[string]any{"staleness": "sync"}, true},
		{map[string]any{"staleness": "sync", "updateEvery": "epoch"}, false},
		{map[string]any{"staleness": int64(0), "updateEvery": "interval"}, true},
		{map[string]any{"staleness": int64(1), "updateEvery": "4"}, true},
	})
}
