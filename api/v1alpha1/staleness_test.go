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

// TestStalenessBound: the CRD's rule on spec.training.staleness, evaluated as the API server
// evaluates it, admits "sync" and exactly the bounds 0 … jobconfig.MaxStaleness, and its
// message names that range.
func TestStalenessBound(t *testing.T) {
	data, err := os.ReadFile("../../config/crd/bases/dorylus.dev_gnntrainingjobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	rules := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["training"].Properties["staleness"].XValidations
	if len(rules) != 1 {
		t.Fatalf("spec.training.staleness has %d rules, want 1", len(rules))
	}
	if want := fmt.Sprintf("[0, %d]", jobconfig.MaxStaleness); !strings.Contains(rules[0].Message, want) {
		t.Errorf("the rule's message %q does not name %s", rules[0].Message, want)
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
	for _, tc := range []struct {
		self  any
		admit bool
	}{{jobconfig.SyncStaleness, true}, {"fast", false}, {int64(-1), false}, {int64(0), true},
		{int64(jobconfig.MaxStaleness), true}, {int64(jobconfig.MaxStaleness + 1), false}} {
		out, _, err := prg.Eval(map[string]any{"self": tc.self})
		if err != nil || out.Value() != tc.admit {
			t.Errorf("rule %q on %v: %v, %v; want %v", rules[0].Rule, tc.self, out, err, tc.admit)
		}
	}
}
