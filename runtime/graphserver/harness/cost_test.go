package harness_test

import (
	"context"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/knative"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
	"github.com/dorylus-gnn/dorylus/runtime/function"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver/harness"
)

// costRun prices graphServers c5n.2xlarge graph servers and one c5.xlarge parameter server
// with the default price list; serverRate is what they cost per second, read off that list.
func costRun(graphServers int, f cost.Function) (run *cost.Run, serverRate float64) {
	run = &cost.Run{Prices: cost.Default, Function: f, Base: cost.Usage{KnativeInstance: "c5n.2xlarge", Servers: []cost.Servers{
		{Role: "graph servers", Instance: "c5n.2xlarge", Count: graphServers},
		{Role: "parameter servers", Instance: "c5.xlarge", Count: 1}}}}
	in := cost.Default.Instances
	return run, (float64(graphServers)*in["c5n.2xlarge"].HourUSD + in["c5.xlarge"].HourUSD) / 3600
}

// near reports a ≈ b to 1e-9 relative (1e-15 absolute).
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-15+1e-9*math.Abs(b) }

// TestCostFromServerHours: with the cpu backend the cost is the servers' time alone; it grows
// every epoch by the servers' rate times the epoch's duration.
func TestCostFromServerHours(t *testing.T) {
	c := gcnConfig(5)
	var rate float64
	c.Cost, rate = costRun(2, cost.NoFunction)
	res := train(t, c, 2, 1)
	prev := 0.0
	for _, ev := range res.Epochs {
		if ev.CostUSD <= prev || !near(ev.EpochCostUSD, ev.CostUSD-prev) || ev.Calls != 0 {
			t.Errorf("epoch %d: cost $%g (+$%g), %d calls; previous $%g", ev.Epoch, ev.CostUSD, ev.EpochCostUSD, ev.Calls, prev)
		}
		if ev.Epoch > 1 && !near(ev.EpochCostUSD, rate*ev.Seconds) {
			t.Errorf("epoch %d: +$%.12g, want %.12g $/s × %.6f s = $%.12g", ev.Epoch, ev.EpochCostUSD, rate, ev.Seconds, rate*ev.Seconds)
		}
		prev = ev.CostUSD
	}
	if res.Final.CostUSD < prev {
		t.Errorf("result: cost $%g below the last epoch's $%g", res.Final.CostUSD, prev)
	}
	t.Logf("cost after %d epochs: $%.9f (%.3g $/s of servers)", len(res.Epochs), res.Final.CostUSD, rate)
}

// functionRun is a run whose tensor tasks went to a function: its handler and URL, the graph
// servers' backends, and the result.
type functionRun struct {
	h        *function.Handler
	url      string
	backends []*remote.Backend
	res      *harness.Result
}

// trainOnFunction trains c on two graph servers and a parameter server whose tensor tasks go
// through the knative backend to a real function handler served over HTTP on loopback; with
// local, the kinds of task it places locally (dispatch.Placement) run in the graph server's
// cpu backend instead.
func trainOnFunction(t *testing.T, c graphserver.Config, local func(*dispatch.TaskRequest) bool) functionRun {
	t.Helper()
	h, err := function.NewHandler(function.Faults{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(function.HTTPHandler(h, func() bool { return true }))
	t.Cleanup(srv.Close)
	var backends []*remote.Backend // Run builds them one after the other
	res, err := harness.Run(context.Background(), harness.Options{Dataset: cora(t), GraphServers: 2, ParamServers: 1, Train: c,
		Backend: func(int) (dispatch.Backend, error) {
			tune := remote.Options{MaxConcurrency: 4}
			if local != nil {
				cb, err := cpu.New(cpu.Options{})
				if err != nil {
					return nil, err
				}
				tune.Placement, tune.Local = dispatch.NewPlacement(local), cb
			}
			b, err := knative.New(knative.Options{URLs: []string{srv.URL}, Tuning: tune})
			if err != nil {
				return nil, err
			}
			backends = append(backends, b)
			return b, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return functionRun{h, srv.URL, backends, res}
}

// TestCostCountsEveryServersCalls trains on two graph servers whose tensor tasks go to a real
// function handler over HTTP (the knative backend): graph server 0's cost counts the calls
// of both, training and evaluation, and prices their billed time as vCPU-seconds.
func TestCostCountsEveryServersCalls(t *testing.T) {
	c := gcnConfig(3)
	c.Intervals = 2
	var rate float64
	c.Cost, rate = costRun(2, cost.Knative)
	vcpu := cost.Default.Instances["c5n.2xlarge"].HourUSD / float64(cost.Default.Instances["c5n.2xlarge"].VCPUs) / 3600
	run := trainOnFunction(t, c, nil)
	h, backends, res := run.h, run.backends, run.res
	var sum cost.Calls
	for i, b := range backends {
		bl := b.Billing()
		if bl.Requests == 0 {
			t.Errorf("graph server %d sent no calls", i)
		}
		sum.Requests += bl.Requests
		sum.Billed += bl.Billed
	}
	f := res.Final
	if f.Calls != sum.Requests || f.Calls != h.Calls() || math.Abs(f.BilledSeconds-sum.Billed.Seconds()) > 1e-9 {
		t.Errorf("result counts %d calls, %.6f s; the graph servers sent %d calls, %.6f s; the function served %d",
			f.Calls, f.BilledSeconds, sum.Requests, sum.Billed.Seconds(), h.Calls())
	}
	prev := graphserver.Event{}
	for _, ev := range res.Epochs {
		calls := (ev.BilledSeconds - prev.BilledSeconds) * vcpu
		if ev.Epoch > 1 && !near(ev.EpochCostUSD, rate*ev.Seconds+calls) {
			t.Errorf("epoch %d: +$%.12g, want servers $%.12g + calls $%.12g", ev.Epoch, ev.EpochCostUSD, rate*ev.Seconds, calls)
		}
		if ev.Calls <= prev.Calls || ev.CostUSD <= prev.CostUSD {
			t.Errorf("epoch %d: %d calls, $%g; epoch before: %d calls, $%g", ev.Epoch, ev.Calls, ev.CostUSD, prev.Calls, prev.CostUSD)
		}
		prev = ev
	}
	if least := prev.CostUSD + (f.BilledSeconds-prev.BilledSeconds)*vcpu; f.CostUSD < least {
		t.Errorf("result: $%g, below the last epoch's $%g and the later calls' $%g", f.CostUSD, prev.CostUSD, least-prev.CostUSD)
	}
	t.Logf("%d calls, %.3f billed s, cost $%.9f", f.Calls, f.BilledSeconds, f.CostUSD)
}

// TestCountsTasksByPlace trains on two graph servers whose tensor tasks of layer 1 (the output
// layer) run in the graph server and the others go to a real function handler over HTTP: every
// epoch line and the result count the calls and the local tasks of both servers, training and
// evaluation, as their backends counted them; the function served exactly the calls, and each
// kind of task was placed as asked. The trace records a wait on the function inside each
// training task of layer 0 (2 servers × 2 intervals × 3 epochs, AV and ∇AV) and none inside
// layer 1's, which computed here.
func TestCountsTasksByPlace(t *testing.T) {
	c := gcnConfig(3)
	c.Intervals = 2
	c.Trace = trace.New(0, 1<<12) // both servers'
	run := trainOnFunction(t, c, func(req *dispatch.TaskRequest) bool { return req.Layer == 1 })
	waits := map[int32]int{}
	for _, sp := range c.Trace.Spans() {
		if sp.Kind == trace.WaitFunction {
			waits[sp.Layer]++
		}
	}
	if len(waits) != 1 || waits[0] != 2*2*3*2 {
		t.Errorf("waits on the function by layer %v, want 24 of layer 0 only", waits)
	}
	var sum cost.Calls
	for i, b := range run.backends {
		bl := b.Billing()
		local, remote := b.Placement().Counts()
		if bl.Requests == 0 || bl.Local == 0 || bl.Local != local || remote == 0 {
			t.Errorf("graph server %d: %+v billed, placement %d local %d remote: want calls and local tasks, as placed", i, bl, local, remote)
		}
		for _, k := range b.Placement().Kinds() {
			if k.Local != (k.Layer == 1) {
				t.Errorf("graph server %d placed %+v", i, k)
			}
		}
		sum.Requests += bl.Requests
		sum.Local += bl.Local
	}
	f := run.res.Final
	if f.Calls != sum.Requests || f.Calls != run.h.Calls() || f.LocalTasks != sum.Local {
		t.Errorf("result: %d calls, %d local tasks; the graph servers sent %d calls and ran %d tasks locally; the function served %d",
			f.Calls, f.LocalTasks, sum.Requests, sum.Local, run.h.Calls())
	}
	prev := graphserver.Event{}
	for _, ev := range run.res.Epochs {
		if ev.Calls <= prev.Calls || ev.LocalTasks <= prev.LocalTasks || ev.LocalTasks > f.LocalTasks {
			t.Errorf("epoch %d: %d calls, %d local; epoch before: %d, %d; result %d local", ev.Epoch, ev.Calls, ev.LocalTasks, prev.Calls, prev.LocalTasks, f.LocalTasks)
		}
		prev = ev
	}
	t.Logf("%d calls, %d tasks in the graph servers", f.Calls, f.LocalTasks)
}
