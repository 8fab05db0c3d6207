package cost

import (
	"strings"
	"testing"
	"time"
)

// TestRunAt prices the same usage through Run as Estimate does, the calls going to the
// function's lines only.
func TestRunAt(t *testing.T) {
	base := Usage{Servers: []Servers{{Role: "graph servers", Instance: "c5n.2xlarge", Count: 2}}, LambdaMemoryMB: 1024, KnativeInstance: "c5.xlarge"}
	calls := Calls{Requests: 1000, Billed: 50 * time.Second}
	for _, c := range []struct {
		f    Function
		want Usage
	}{
		{NoFunction, Usage{}},
		{Lambda, Usage{Lambda: calls}},
		{Knative, Usage{Knative: calls}},
	} {
		r := Run{Prices: Default, Base: base, Function: c.f}
		got, err := r.At(time.Hour, calls)
		if err != nil {
			t.Fatal(err)
		}
		u := base
		u.Wall, u.Lambda, u.Knative = time.Hour, c.want.Lambda, c.want.Knative
		want, err := Default.Estimate(u)
		if err != nil {
			t.Fatal(err)
		}
		if got.TotalUSD != want.TotalUSD || len(got.Items) != len(want.Items) {
			t.Errorf("function %d: %+v, want %+v", c.f, got, want)
		}
	}
	r := Run{BudgetUSD: 2}
	if r.Over(1.99) || !r.Over(2) || (&Run{}).Over(1e9) {
		t.Error("Over: want cost ≥ budget, and never without a budget")
	}
}

// TestRunValidate: unknown instance types, Lambda without its memory and a negative budget
// are refused.
func TestRunValidate(t *testing.T) {
	ok := Run{Prices: Default, Base: Usage{Servers: []Servers{{Role: "graph servers", Instance: "c5.xlarge", Count: 1}}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mutate func(*Run)
		want   string
	}{
		{func(r *Run) { r.Base.Servers[0].Instance = "z9.huge" }, `instance type "z9.huge"`},
		{func(r *Run) { r.Function = Lambda }, "Lambda memory 0 MB"},
		{func(r *Run) { r.Function, r.Base.KnativeInstance = Knative, "nope" }, `knative node instance type "nope"`},
		{func(r *Run) { r.BudgetUSD = -1 }, "budget -1"},
	} {
		r := ok
		r.Base.Servers = []Servers{ok.Base.Servers[0]}
		c.mutate(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", r, err, c.want)
		}
	}
}

// TestReadPrices overlays a list on Default: named fields and instance types replace
// Default's, the rest stay; Default itself is untouched.
func TestReadPrices(t *testing.T) {
	p, err := ReadPrices(strings.NewReader(`{"source": "spot", "asOf": "2026-12-01", "lambdaGBSecondUSD": 1e-5,
		"instances": {"c5.xlarge": {"vcpus": 4, "memoryGiB": 8, "hourUSD": 0.05}, "m7i.large": {"vcpus": 2, "hourUSD": 0.1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != "spot" || p.AsOf != "2026-12-01" || p.LambdaGBSecondUSD != 1e-5 || p.LambdaRequestUSD != Default.LambdaRequestUSD {
		t.Errorf("prices %+v", p)
	}
	if p.Instances["c5.xlarge"].HourUSD != 0.05 || p.Instances["m7i.large"].VCPUs != 2 || p.Instances["r5.xlarge"] != Default.Instances["r5.xlarge"] {
		t.Errorf("instances %+v", p.Instances)
	}
	if Default.Instances["c5.xlarge"].HourUSD != 0.17 || len(Default.Instances) != len(p.Instances)-1 {
		t.Error("ReadPrices changed Default")
	}
	for _, bad := range []string{`{"instances": {"x": {"vcpus": 0, "hourUSD": 1}}}`, `{"lambdaRequestUSD": -1}`, `{"hourly": 1}`, `{`} {
		if _, err := ReadPrices(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
