package plan

import (
	"math"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// TestPlacing weighs tasks with the shipped calibration and 20 ms a call (the injected latency
// of hack/bench/latency-hiding.sh): an output layer of 15 columns on an interval of Coauthor
// CS's (1146 rows of 16) costs less in the graph server, the first layer of R-MAT 1M/20M/128's
// (62 500 dense rows of 128 features) more; a function's call adds the calibrated overhead per
// call and per byte; the local side is the compute of every interval on the server's cores.
func TestPlacing(t *testing.T) {
	p := Placing{Cal: Default(), Latency: 20 * time.Millisecond, Intervals: 8, Cores: 2}
	small := Task{Rows: 1146, In: 16, Out: 15}
	big := Task{Rows: 62500, In: 128, Out: 16, First: true, Backward: true}
	if !p.Local(small) {
		l, r := p.Costs(small)
		t.Errorf("output layer of 16 → 15 columns: local %.3g s, remote %.3g s: want local", l, r)
	}
	if p.Local(big) {
		l, r := p.Costs(big)
		t.Errorf("first layer of 128 → 16 on 62 500 rows: local %.3g s, remote %.3g s: want remote", l, r)
	}
	l, r := p.Costs(big)
	k := big.count()
	c, bytes := k.seconds(p.Cal), k.bytes
	if math.Abs(l-4*c) > 1e-12 || math.Abs(r-(0.020+c)) > 1e-12 || c <= 0 {
		t.Errorf("costs %g, %g of a task of %g core-seconds: want 8 intervals on 2 cores and one call of 20 ms", l, r, c)
	}
	f := p
	f.Function = true
	if _, fr := f.Costs(big); math.Abs(fr-r-(p.Cal.CallSeconds+p.Cal.CallCoreSeconds+bytes*p.Cal.CallByteSeconds)) > 1e-12 {
		t.Errorf("a function's call costs %g, the cpu backend's %g: want the calibrated overhead of %g bytes more", fr, r, bytes)
	}
	// ∇AV above the first layer also computes and returns dH
	back := small
	back.Backward = true
	if kb, kf := back.count(), small.count(); kb.seconds(p.Cal) <= kf.seconds(p.Cal) || kb.bytes <= kf.bytes || kf.bytes <= 0 {
		t.Errorf("∇AV %+v, AV %+v: want more work and bytes", kb, kf)
	}
}

// TestPredictPlacement predicts the run of TestPlacementSplitsByCost (runtime/dorylus): one
// graph server of 2 cores and 8 intervals, 3 ms added to every task, 256 dense features into
// 64 into 4: with placement auto the output layer's AV and ∇AV (16 tasks an epoch) run in the
// server, its first layer's stay calls, and the chain sheds their latency; the tasks of the two
// placements are as many, and with placement remote (or none) every task is a call. A GAT's
// tasks stay calls.
func TestPredictPlacement(t *testing.T) {
	w := Workload{Vertices: 20000, Entries: 200000, Features: 256, Classes: 4, Model: Model{Architecture: GCN, Layers: 2, Hidden: 64}}
	m := Machine{ServerCores: 2, ParamServerCores: 1, ExtraLatency: 3 * time.Millisecond}
	c := Config{Backend: CPU, GraphServers: 1, Intervals: 8, Staleness: jobconfig.Bounded(1), Placement: jobconfig.PlacementAuto}
	auto, err := Predict(w, c, m, Default())
	if err != nil {
		t.Fatal(err)
	}
	c.Placement = jobconfig.PlacementRemote
	remote, err := Predict(w, c, m, Default())
	if err != nil {
		t.Fatal(err)
	}
	if auto.LocalTasks != 16 || auto.Calls != 16 || remote.Calls != 32 || remote.LocalTasks != 0 {
		t.Errorf("auto: %v local, %v calls; remote: %v local, %v calls; want 16 and 16, 0 and 32", auto.LocalTasks, auto.Calls, remote.LocalTasks, remote.Calls)
	}
	if auto.ChainSeconds >= remote.ChainSeconds || !near(remote.ChainSeconds-auto.ChainSeconds, 2*0.003/2) {
		t.Errorf("chain: auto %v s, remote %v s: want two calls' 3 ms less over S+1 = 2 epochs in flight", auto.ChainSeconds, remote.ChainSeconds)
	}
	gat := w
	gat.Model = Model{Architecture: GAT, Layers: 2, Hidden: 8, Heads: 8}
	c.Placement = jobconfig.PlacementAuto
	if g, err := Predict(gat, c, m, Default()); err != nil || g.LocalTasks != 0 {
		t.Errorf("GAT: %v local tasks (%v), want 0", g.LocalTasks, err)
	}
	// a function backend: every Cora-sized task costs less in the server than its call
	cora := Workload{Vertices: 2708, Entries: 13264, Features: 1433, FeatureEntries: 49216, Classes: 7, Model: Model{Architecture: GCN, Layers: 2, Hidden: 16}}
	f := Config{Backend: Knative, GraphServers: 2, Intervals: 2, Concurrency: 2, Staleness: jobconfig.Bounded(1), Placement: jobconfig.PlacementAuto}
	if p, err := Predict(cora, f, Machine{SharedCores: 2}, Default()); err != nil || p.Calls != 0 || p.LocalTasks != 16 || p.CallsSeconds != 0 {
		t.Errorf("knative on Cora: %+v (%v): want no calls and 16 local tasks", p, err)
	}
}
