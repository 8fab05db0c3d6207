package cost

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestEstimate prices half an hour of two c5n.2xlarge graph servers and a c5.xlarge parameter
// server, a million Lambda calls of 1000 s in all at 2048 MB, and an hour of Knative calls,
// and compares every line with the figures worked out by hand.
func TestEstimate(t *testing.T) {
	b, err := Default.Estimate(Usage{
		Wall: 30 * time.Minute,
		Servers: []Servers{
			{Role: "graph servers", Instance: "c5n.2xlarge", Count: 2},
			{Role: "parameter servers", Instance: "c5.xlarge", Count: 1},
		},
		Lambda:         Calls{Requests: 1_000_000, Billed: 1000 * time.Second},
		LambdaMemoryMB: 2048,
		Knative:        Calls{Requests: 10, Billed: time.Hour}, KnativeInstance: "c5n.2xlarge",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Item{
		{"graph servers (2 × c5n.2xlarge)", 1, "instance-hours", 0.432, 0.432},                // 2 × 0.5 h × $0.432
		{"parameter servers (1 × c5.xlarge)", 0.5, "instance-hours", 0.17, 0.085},             // 0.5 h × $0.17
		{"lambda requests", 1e6, "requests", 2e-7, 0.20},                                      // $0.20 per million
		{"lambda duration (2048 MB)", 2000, "GB-seconds", 0.0000166667, 0.0333334},            // 1000 s × 2 GB
		{"knative calls (one vCPU of c5n.2xlarge each)", 3600, "vCPU-seconds", 1.5e-5, 0.054}, // $0.432 / 8 vCPUs for an hour
	}
	if len(b.Items) != len(want) {
		t.Fatalf("items %+v, want %d", b.Items, len(want))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12+1e-9*math.Abs(b) }
	for i, w := range want {
		g := b.Items[i]
		if g.Name != w.Name || g.Unit != w.Unit || !near(g.Quantity, w.Quantity) || !near(g.UnitUSD, w.UnitUSD) || !near(g.USD, w.USD) {
			t.Errorf("item %d: %+v, want %+v", i, g, w)
		}
	}
	if total := 0.432 + 0.085 + 0.20 + 0.0333334 + 0.054; !near(b.TotalUSD, total) {
		t.Errorf("total $%.7f, want $%.7f", b.TotalUSD, total)
	}
	if !strings.Contains(b.Prices, "2024") {
		t.Errorf("prices %q: want their date", b.Prices)
	}
}

// TestEstimateLeavesOutUnused: a cpu run has only server lines.
func TestEstimateLeavesOutUnused(t *testing.T) {
	b, err := Default.Estimate(Usage{Wall: 2 * time.Hour, Servers: []Servers{{Role: "server", Instance: "c5.xlarge", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Items) != 1 || math.Abs(b.TotalUSD-0.34) > 1e-12 {
		t.Errorf("breakdown %+v, want one line of $0.34", b)
	}
}

// TestEstimateErrors: an unknown instance type is named with the known ones; negative or
// impossible usage is refused.
func TestEstimateErrors(t *testing.T) {
	for _, c := range []struct {
		u    Usage
		want string
	}{
		{Usage{Servers: []Servers{{Role: "graph servers", Instance: "z9.huge", Count: 1}}}, `graph servers instance type "z9.huge": no price known (known: c5.2xlarge`},
		{Usage{Knative: Calls{Billed: time.Second}, KnativeInstance: "nope"}, `knative node instance type "nope"`},
		{Usage{Wall: -time.Second}, "negative wall time"},
		{Usage{Lambda: Calls{Requests: -1}}, "negative call counts"},
		{Usage{Lambda: Calls{Requests: 1}, LambdaMemoryMB: 64}, "Lambda memory 64 MB"},
	} {
		if _, err := Default.Estimate(c.u); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.u, err, c.want)
		}
	}
}
