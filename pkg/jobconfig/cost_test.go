package jobconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
)

// TestCostRun: the cost section and the backend make the run graph server 0 prices, and the
// section survives the wire form, price list included.
func TestCostRun(t *testing.T) {
	if validConfig().CostRun() != nil {
		t.Fatal("a config without a cost section prices something")
	}
	spot := cost.Default
	spot.Source = "spot"
	c := validConfig()
	c.Cost = &Cost{Prices: &spot, GraphServerInstance: "c5n.xlarge", ParameterServerInstance: "c5.xlarge", BudgetUSD: 0.5}
	c.Backend = Backend{Kind: BackendLambda, Lambda: &Lambda{FunctionName: "f", Region: "r", MemoryMB: 2048, MaxConcurrency: 4, DataPath: DataPathInline}}
	want := &cost.Run{Prices: spot, Function: cost.Lambda, BudgetUSD: 0.5, Base: cost.Usage{LambdaMemoryMB: 2048, KnativeInstance: "c5n.xlarge",
		Servers: []cost.Servers{{Role: "graph servers", Instance: "c5n.xlarge", Count: 2}, {Role: "parameter servers", Instance: "c5.xlarge", Count: 1}}}}
	if diff := cmp.Diff(want, c.CostRun()); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
	data, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c.Cost, back.Cost); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	c.Backend = Backend{Kind: BackendKnative, Knative: &Knative{URL: "http://fn", MaxConcurrency: 4}}
	if r := c.CostRun(); r.Function != cost.Knative || r.Base.KnativeInstance != "c5n.xlarge" {
		t.Errorf("knative run %+v", r)
	}
}

// TestValidateCost names the cost fields at fault.
func TestValidateCost(t *testing.T) {
	for _, c := range []struct {
		cost Cost
		want string
	}{
		{Cost{ParameterServerInstance: "c5.xlarge"}, "cost.graphServerInstance must not be empty"},
		{Cost{GraphServerInstance: "z9.huge", ParameterServerInstance: "c5.xlarge"}, `graph servers instance type "z9.huge": no price known`},
		{Cost{GraphServerInstance: "c5.xlarge", ParameterServerInstance: "c5.xlarge", BudgetUSD: -1}, "budget -1"},
	} {
		cfg := validConfig()
		cfg.Cost = &c.cost
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cost, err, c.want)
		}
	}
}
