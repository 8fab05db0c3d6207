package graphserver

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestBudgetStopsTheRun drives the coordinator of two graph servers, held on c5.xlarge nodes,
// through epochs whose reports carry 7 and 3 Lambda calls of 40 ms each: the cost counts both
// servers' calls, and the first epoch whose cost reaches the budget is reported at once
// (although the status interval holds every other report back), stops every graph server
// after it with its evaluation, and is the run's last: the result reports the cost that
// reached the budget, not the servers' time since.
func TestBudgetStopsTheRun(t *testing.T) {
	const memoryMB = 2048
	run := &cost.Run{Prices: cost.Default, Function: cost.Lambda, Base: cost.Usage{LambdaMemoryMB: memoryMB,
		Servers: []cost.Servers{{Role: "graph servers", Instance: "c5.xlarge", Count: 2}}}}
	calls := func(epochs int) cost.Calls {
		return cost.Calls{Requests: int64(10 * epochs), Billed: time.Duration(epochs) * 10 * 40 * time.Millisecond}
	}
	perEpoch, err := run.At(0, calls(1))
	if err != nil {
		t.Fatal(err)
	}
	run.BudgetUSD = 3.5 * perEpoch.TotalUSD // reached by epoch 4's calls
	f := newFake()
	var log, events bytes.Buffer
	started := time.Now()
	cfg := &Config{Partitions: 2, Epochs: 10, EvalEvery: 10, Status: f, StatusInterval: time.Hour, Cost: run, Started: started,
		Log: &log, Events: &events}
	out := &effects{}
	c, rep := newCoordinator(cfg, [3]int{2, 2, 2}, newKeeper(), out), newReports(cfg, nil)
	c.begin(0)
	var cmds []*rpc.CommandRequest
	for e := range 4 {
		for p, n := range []uint64{7, 3} {
			got, err := c.epochDone(&rpc.EpochReport{From: uint32(p), Epoch: uint32(e), Calls: n, BilledNs: n * uint64(40*time.Millisecond)}, e)
			if err != nil {
				t.Fatal(err)
			}
			carried(t, rep, out)
			cmds = append(cmds, got...)
		}
		if e == 0 || e == 3 {
			f.wait(t) // the first report, and the one that reached the budget
		}
	}
	if len(cmds) != 2 || !cmds[0].Stop || cmds[0].StopAfter != 3 || cmds[1].Evaluate == nil || cmds[1].Evaluate.Id != 3 {
		t.Fatalf("commands %v: want a stop after epoch 4 (3 from 0) and its evaluation", cmds)
	}
	time.Sleep(20 * time.Millisecond) // later servers' time, which the result must not add
	for p := range 2 {
		if _, err := c.evalDone(&rpc.EvalReport{From: uint32(p), Id: 3, Correct: []uint64{1, 1, 1}, Loss: []float64{0, 0}}); err != nil {
			t.Fatal(err)
		}
		carried(t, rep, out)
	}
	f.wait(t) // the result
	f.mu.Lock()
	reports := f.reports
	f.mu.Unlock()
	if len(reports) != 3 {
		t.Fatalf("reports %+v: want epoch 1's, the budget's and the result", reports)
	}
	budget, result := reports[1], reports[2]
	if result.Epoch != 4 || result.TestAccuracy != 1 {
		t.Errorf("the result at epoch %d (test accuracy %v): want 4, 1", result.Epoch, result.TestAccuracy)
	}
	if !run.Over(budget.CostUSD) || budget.CostUSD-budget.EpochCostUSD >= run.BudgetUSD {
		t.Errorf("budget $%g reached at $%g, the epoch costing $%g: want the epoch that crossed it", run.BudgetUSD, budget.CostUSD, budget.EpochCostUSD)
	}
	if result.CostUSD != budget.CostUSD || result.EpochCostUSD != budget.EpochCostUSD {
		t.Errorf("the result: $%g (epoch $%g), want the budget's $%g (epoch $%g)", result.CostUSD, result.EpochCostUSD, budget.CostUSD, budget.EpochCostUSD)
	}
	wantCalls := calls(4)
	if !strings.Contains(log.String(), "reached the budget") || !strings.Contains(events.String(), `"event":"result"`) {
		t.Errorf("log %q, events %q: want the budget said and a result", log.String(), events.String())
	}
	if c.calls != wantCalls {
		t.Errorf("calls %+v, want %+v", c.calls, wantCalls)
	}
	rep.status.close(time.Second)
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
	out := &effects{}
	c := newCoordinator(cfg, [3]int{1, 1, 1}, newKeeper(), out)
	c.begin(0)
	if _, err := c.epochDone(&rpc.EpochReport{Epoch: 0, Calls: 4, BilledNs: uint64(4 * 25 * time.Millisecond)}, 0); err != nil {
		t.Fatal(err)
	}
	carried(t, newReports(cfg, nil), out)
	var ev Event
	if err := json.Unmarshal(events.Bytes(), &ev); err != nil {
		t.Fatal(err)
	}
	if !near(ev.CostUSD, 0.75+epoch.TotalUSD) || !near(ev.EpochCostUSD, epoch.TotalUSD) || !near(c.progress.CostUSD, ev.CostUSD) {
		t.Errorf("epoch 1: $%.12g (+$%.12g), progress $%.12g; want $0.75 + $%.12g", ev.CostUSD, ev.EpochCostUSD, c.progress.CostUSD, epoch.TotalUSD)
	}
}

// TestCountsTasksByPlace drives the coordinator of two graph servers through two epochs and
// the final evaluation, each report carrying its server's function calls and tensor tasks run
// locally since its last: each epoch's line holds the sums over both servers up to that epoch,
// the result's the sums with the evaluation's too, and the status the same plus what earlier
// launches of graph server 0 reported (CallsBefore).
func TestCountsTasksByPlace(t *testing.T) {
	type counts struct{ calls, local int64 }
	for _, before := range []counts{{}, {100, 50}} {
		cfg := &Config{Partitions: 2, Epochs: 2, EvalEvery: 2, CallsBefore: cost.Calls{Requests: before.calls, Local: before.local}}
		out := &effects{}
		c := newCoordinator(cfg, [3]int{2, 2, 2}, newKeeper(), out)
		c.begin(0)
		var lines, status []counts
		take := func() {
			for _, ev := range out.writeLines {
				lines = append(lines, counts{ev.Calls, ev.LocalTasks})
			}
			for _, u := range out.writeStatus {
				status = append(status, counts{u.progress.TensorCalls - before.calls, u.progress.LocalTensorTasks - before.local})
			}
			out.reset()
		}
		for e, reports := range [][2]counts{{{7, 3}, {2, 5}}, {{1, 4}, {0, 6}}} {
			for p, n := range reports {
				r := &rpc.EpochReport{From: uint32(p), Epoch: uint32(e), Calls: uint64(n.calls), LocalTasks: uint64(n.local)}
				if _, err := c.epochDone(r, e+1); err != nil {
					t.Fatal(err)
				}
				take()
			}
		}
		for p, n := range []counts{{2, 1}, {0, 0}} {
			r := &rpc.EvalReport{From: uint32(p), Id: 1, Correct: []uint64{1, 1, 1}, Loss: []float64{0, 0}, Calls: uint64(n.calls), LocalTasks: uint64(n.local)}
			if _, err := c.evalDone(r); err != nil {
				t.Fatal(err)
			}
			take()
		}
		// Epoch 1: 7+2 calls, 3+5 local; epoch 2: 9+1+0, 8+4+6; the result: 10+2, 18+1.
		want := []counts{{9, 8}, {10, 18}, {12, 19}}
		if !slices.Equal(lines, want) || !slices.Equal(status, want) {
			t.Errorf("calls and local tasks: lines %v, status %v less %v before; want %v", lines, status, before, want)
		}
		if c.calls.Requests != 12 || c.calls.Local != 19 {
			t.Errorf("the coordinator's calls %+v: want 12 requests, 19 local", c.calls)
		}
	}
}
