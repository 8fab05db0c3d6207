package graphserver

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestBudgetReportedAtOnce drives the coordinator of two graph servers through epochs whose
// reports carry 7 and 3 Lambda calls of 40 ms each: the cost counts both servers' calls, and
// the first epoch whose cost reaches the budget is reported at once, although the status
// interval holds every other report back.
func TestBudgetReportedAtOnce(t *testing.T) {
	const memoryMB = 2048
	run := &cost.Run{Prices: cost.Default, Function: cost.Lambda, Base: cost.Usage{LambdaMemoryMB: memoryMB}}
	perEpoch, err := run.At(0, cost.Calls{Requests: 10, Billed: 10 * 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run.BudgetUSD = 3.5 * perEpoch.TotalUSD // reached by epoch 4
	f := newFake()
	var log bytes.Buffer
	cfg := &Config{Partitions: 2, Epochs: 10, EvalEvery: 10, Status: f, StatusInterval: time.Hour, Cost: run, Log: &log}
	c := newCoordinator(cfg, [3]int{1, 1, 1}, newKeeper())
	c.begin(0)
	for e := range 5 {
		for p, calls := range []uint64{7, 3} {
			if _, err := c.epochDone(&rpc.EpochReport{From: uint32(p), Epoch: uint32(e), Calls: calls, BilledNs: calls * uint64(40*time.Millisecond)}, e); err != nil {
				t.Fatal(err)
			}
		}
		if e == 0 || e == 3 {
			f.wait(t) // the first report, and the one that reached the budget
		}
	}
	time.Sleep(20 * time.Millisecond)
	f.mu.Lock()
	reports := f.reports
	f.mu.Unlock()
	if len(reports) != 2 {
		t.Fatalf("reports %+v: want epoch 1's and the budget's", reports)
	}
	for i, e := range []int{1, 4} {
		want, err := run.At(0, cost.Calls{Requests: int64(10 * e), Billed: time.Duration(e) * 10 * 40 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if got := reports[i].CostUSD; !near(got, want.TotalUSD) {
			t.Errorf("report %d: $%.12g, want $%.12g (%d epochs of calls)", i, got, want.TotalUSD, e)
		}
	}
	if got := reports[1].EpochCostUSD; !near(got, perEpoch.TotalUSD) {
		t.Errorf("the budget's report: epoch cost $%.12g, want $%.12g", got, perEpoch.TotalUSD)
	}
	if !run.Over(reports[1].CostUSD) || run.Over(3*perEpoch.TotalUSD) {
		t.Errorf("budget $%g: reported $%g", run.BudgetUSD, reports[1].CostUSD)
	}
	if !strings.Contains(log.String(), "reached the budget") {
		t.Errorf("log %q does not say the budget was reached", log.String())
	}
	c.status.close(time.Second)
}

// TestBudgetBetweenEpochs: servers are billed by the second, so a run whose budget runs out
// in the middle of an epoch is reported when graph server 0 next prices it, not at the
// epoch's end: a price below the budget reports nothing, the first at or above it reports
// that cost at once, and later ones nothing more.
func TestBudgetBetweenEpochs(t *testing.T) {
	run := &cost.Run{Prices: cost.Default, Base: cost.Usage{Servers: []cost.Servers{{Role: "graph servers", Instance: "c5.xlarge", Count: 2}}}}
	second, err := run.At(time.Second, cost.Calls{})
	if err != nil {
		t.Fatal(err)
	}
	run.BudgetUSD = 10 * second.TotalUSD // ten seconds of servers
	f := newFake()
	started := time.Now()
	cfg := &Config{Partitions: 2, Epochs: 10, EvalEvery: 10, Status: f, StatusInterval: time.Hour, Cost: run, Started: started}
	c := newCoordinator(cfg, [3]int{1, 1, 1}, newKeeper())
	if !c.watchesBudget() {
		t.Fatal("a run with a budget is not priced between epochs")
	}
	c.begin(0)
	for _, at := range []time.Duration{5 * time.Second, 9900 * time.Millisecond, 10100 * time.Millisecond, 12 * time.Second} {
		if err := c.checkBudgetAt(started.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	f.wait(t) // the budget's
	time.Sleep(20 * time.Millisecond)
	f.mu.Lock()
	reports := f.reports
	f.mu.Unlock()
	if len(reports) != 1 {
		t.Fatalf("reports %+v: want the budget's alone", reports)
	}
	if got, want := reports[0].CostUSD, 10.1*second.TotalUSD; !near(got, want) || !run.Over(got) {
		t.Errorf("the budget's report: $%.12g, want $%.12g (10.1 s of servers, budget $%g)", got, want, run.BudgetUSD)
	}
	c.status.close(time.Second)
}

// near reports a ≈ b to 1e-9 relative.
func near(a, b float64) bool { return a == b || (a-b)*(a-b) <= 1e-18*b*b }

// TestCostGoesOn: a restarted graph server 0 adds its launch's cost to what the job's status
// held, and the first epoch's cost is its own.
func TestCostGoesOn(t *testing.T) {
	run := &cost.Run{Prices: cost.Default, Function: cost.Lambda, Base: cost.Usage{LambdaMemoryMB: 1024}}
	epoch, err := run.At(0, cost.Calls{Requests: 4, Billed: 4 * 25 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var events bytes.Buffer
	cfg := &Config{Partitions: 1, Epochs: 10, EvalEvery: 10, Cost: run, CostBefore: 0.75, Events: &events}
	c := newCoordinator(cfg, [3]int{1, 1, 1}, newKeeper())
	c.begin(0)
	if _, err := c.epochDone(&rpc.EpochReport{Epoch: 0, Calls: 4, BilledNs: uint64(4 * 25 * time.Millisecond)}, 0); err != nil {
		t.Fatal(err)
	}
	var ev Event
	if err := json.Unmarshal(events.Bytes(), &ev); err != nil {
		t.Fatal(err)
	}
	if !near(ev.CostUSD, 0.75+epoch.TotalUSD) || !near(ev.EpochCostUSD, epoch.TotalUSD) || !near(c.progress.CostUSD, ev.CostUSD) {
		t.Errorf("epoch 1: $%.12g (+$%.12g), progress $%.12g; want $0.75 + $%.12g", ev.CostUSD, ev.EpochCostUSD, c.progress.CostUSD, epoch.TotalUSD)
	}
}
