package plan

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// tiny is a workload whose counts are worked out by hand below: 2 layers 8 → 4 → 2, the
// heaviest of 2 parts with 10 vertices, 50 entries of Â and 4 ghosts.
var tiny = Workload{Vertices: 20, Entries: 80, Features: 8, Classes: 2,
	Model: Model{Architecture: GCN, Layers: 2, Hidden: 4}, Cuts: map[int]Part{2: {Vertices: 10, Entries: 50, Ghosts: 4}}}

// round is a calibration of round numbers.
var round = Calibration{Measured: "2026-12-05", Command: "test", GatherSecondsPerMAC: 1e-3, FeatureSecondsPerMAC: 2e-3, FlopSeconds: 1e-4,
	BytesPerSecond: 1000, ElementSeconds: 1e-4, FeatureElementSeconds: 2e-4, TaskSeconds: 1e-2, MessageSeconds: 1e-2, ParamSeconds: 1e-3, EpochSeconds: 0.5,
	RoundTripSeconds: 1e-2, RoundTripByteSeconds: 1e-4, CallSeconds: 0.1, CallCoreSeconds: 2e-2, CallByteSeconds: 1e-5}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestCount(t *testing.T) {
	got := tiny.Count(2, 2)
	// layer 1 (8 → 4): flops 2·(2·10·8·4) = 1280, MACs 2·50·4 = 400, weights 2·8·4 = 64,
	// ghost bytes 2·4·4·4 = 128, payload 4·(2·10·8 + 2·10·4 + 3·2·8·4) = 1728 (H twice, P and
	// dP, W twice and dW per interval); layer 2 (4 → 2): flops 2·(2·10·4·2) + 2·10·4·2 =
	// 480, MACs 2·50·2 = 200, weights 2·4·2 = 16, ghost bytes 64, payload 4·(2·10·4 + 2·10·2
	// + 3·2·4·2) + dH 4·10·4 = 832; elements 2·(10·8 + 2·10·4) + 2·(10·4 + 2·10·2) = 480;
	// tasks 2·(6·2+2), calls 2·2·2 (AV and ∇AV of each layer), messages 2·2·2·1, round trips
	// 2·2 (push, pull) carrying 2·4·80 bytes, scatters 2·2·2 (SC and ∇SC of each layer).
	want := Epoch{GraphMACs: 600, Flops: 1760, Tasks: 28, Calls: 8, ParamUpdates: 80, Elements: 480, GhostBytes: 192, Messages: 8, PayloadBytes: 2560,
		RoundTrips: 4, RoundTripBytes: 640, Scatters: 8}
	if got != want {
		t.Errorf("Count = %+v, want %+v", got, want)
	}
	sparse := tiny
	sparse.FeatureEntries = 40 // 20 per part of 10 of the 20 vertices: 2·20·4 = 160 MACs of X W and Xᵀ dP
	// payload 2560 less the dense H of layer 1, 2·4·10·8, plus its non-zeros, 2·8·20: 2240
	// elements 480 less the dense input of layer 1, 2·10·8; feature elements 2·20
	if got := sparse.Count(2, 2); got.TensorMACs != 160 || got.Flops != 480 || got.Elements != 320 || got.FeatureElements != 40 || got.PayloadBytes != 2240 {
		t.Errorf("sparse features: TensorMACs %v, Flops %v, Elements %v, FeatureElements %v, PayloadBytes %v; want 160, 480, 320, 40, 2240",
			got.TensorMACs, got.Flops, got.Elements, got.FeatureElements, got.PayloadBytes)
	}
	// One graph server: no scatters; GAT: AE and ∇AE calls too.
	gat := tiny
	gat.Model = Model{Architecture: GAT, Layers: 2, Hidden: 2, Heads: 2}
	if one, g := tiny.Count(1, 2), gat.Count(2, 2); one.Scatters != 0 || one.Messages != 0 || g.Calls != 16 {
		t.Errorf("1 graph server: %v scatters, %v messages, want 0; GAT: %v calls, want 16", one.Scatters, one.Messages, g.Calls)
	}
}

// A GraphSAGE's tensor tasks are a GCN's once per half of [W_self; W_neigh]: twice tiny's
// flops (2·1760), element-wise work (2·480), payload (2·2560), calls (2·8, two per AV and ∇AV)
// and weight elements (2·80, its 2·(8·4 + 4·2) = 80 weights per interval, so 2·4·160 bytes
// pushed and pulled); its Gather, tasks and scatters are the GCN's.
func TestCountSAGE(t *testing.T) {
	sage := tiny
	sage.Model.Architecture = SAGE
	if g, s := tiny.Weights(), sage.Weights(); g != 8*4+4*2 || s != 2*g {
		t.Errorf("weights: gcn %v, sage %v; want 40 and 80", g, s)
	}
	want := Epoch{GraphMACs: 600, Flops: 3520, Tasks: 28, Calls: 16, ParamUpdates: 160, Elements: 960, GhostBytes: 192, Messages: 8, PayloadBytes: 5120,
		RoundTrips: 4, RoundTripBytes: 1280, Scatters: 8}
	if got := sage.Count(2, 2); got != want {
		t.Errorf("Count = %+v, want %+v", got, want)
	}
	sage.FeatureEntries = 40 // TestCount's sparse case, twice: 2·160 MACs, 2·40 feature elements, 2·2240 bytes
	if got := sage.Count(2, 2); got.TensorMACs != 320 || got.Flops != 960 || got.Elements != 640 || got.FeatureElements != 80 || got.PayloadBytes != 4480 {
		t.Errorf("sparse features: TensorMACs %v, Flops %v, Elements %v, FeatureElements %v, PayloadBytes %v; want 320, 960, 640, 80, 4480",
			got.TensorMACs, got.Flops, got.Elements, got.FeatureElements, got.PayloadBytes)
	}
	// On a function backend each tensor task is two calls: 16 a server, 32 over both.
	c := Config{Backend: Lambda, GraphServers: 2, Intervals: 2, Concurrency: 2, MemoryMB: lambdaMBPerVCPU}
	if p, err := Predict(sage, c, Machine{ServerCores: 2, ParamServerCores: 4}, round); err != nil || p.Calls != 32 {
		t.Errorf("lambda: %v calls (%v), want 32", p.Calls, err)
	}
}

func TestPredict(t *testing.T) {
	cluster := Machine{ServerCores: 2, ParamServerCores: 4}
	for _, tc := range []struct {
		name string
		c    Config
		m    Machine
		want Prediction
	}{{
		// graph 0.6 + tasks 0.28 + messages 0.08 = 0.96 core-s; tensor 0.176 + elements
		// 0.048 = 0.224; weights 0.08; work (0.96+0.224+0.08)/2 + 192 B/1000 = 0.824; calls
		// 0.224/8/2 = 0.014 s each; chain (an interval's 4 scatters of 0.01 s, carrying 96
		// bytes of 1e-4 s, + the work)/(S+1) = (0.04 + 0.0096 + 0.824)/2 = 0.4368; gate (2
		// round trips carrying 320 bytes)/(S+1) = 0.026; parameter servers 2·0.08/4.
		name: "cpu", c: Config{Backend: CPU, GraphServers: 2, Intervals: 2, Staleness: jobconfig.Bounded(1), UpdateEvery: jobconfig.UpdateIntervals(1)}, m: cluster,
		want: Prediction{EpochSeconds: 1.35, WorkSeconds: 0.824, ParamSeconds: 0.04, ChainSeconds: 0.4368, GateSeconds: 0.026, Calls: 16, CallSeconds: 0.014},
	}, {
		// "cpu" with one update per graph server per epoch: half the weights fetched, pushed
		// and applied, 0.04 core-s; work (0.96+0.224+0.04)/2 + 0.192 = 0.804; chain (0.04 +
		// 0.0096 + 0.804)/2 = 0.4268; gate an interval's share, one round trip carrying 160
		// bytes, /(S+1) = 0.013; parameter servers 2·0.04/4.
		name: "cpu, an update an epoch", c: Config{Backend: CPU, GraphServers: 2, Intervals: 2, Staleness: jobconfig.Bounded(1)}, m: cluster,
		want: Prediction{EpochSeconds: 1.317, WorkSeconds: 0.804, ParamSeconds: 0.02, ChainSeconds: 0.4268, GateSeconds: 0.013, Calls: 16, CallSeconds: 0.014},
	}, {
		// a call: 0.1 + overhead 0.02 + 2560/8·1e-5 + 0.224/8 on one vCPU = 0.1512; calls
		// 8·0.1512/2 = 0.6048; work (0.96+0.08)/2 + 0.192 = 0.712; chain (S = 0) 0.0496 + an
		// interval's 4 calls, each away from the server's cores, 4·0.1512 + 0.712 = 1.3664;
		// gate 0.052.
		name: "lambda", c: Config{Backend: Lambda, GraphServers: 2, Intervals: 2, Concurrency: 2, MemoryMB: lambdaMBPerVCPU, UpdateEvery: jobconfig.UpdateIntervals(1)}, m: cluster,
		want: Prediction{EpochSeconds: 1.9184, WorkSeconds: 0.712, ParamSeconds: 0.04, CallsSeconds: 0.6048, ChainSeconds: 1.3664, GateSeconds: 0.052, Calls: 16, CallSeconds: 0.1512},
	}, {
		// 4 shared cores, 2 per server: the functions' 0.224 core-s and their calls' overhead
		// 8·0.0232 join the work, (0.224+0.1856)/2 more; no parameter-server bound of its
		// own; 20 ms more per call; on the chain only a call's latency, 0.1 + 0.02: 0.0496 +
		// 4·0.12 + 0.9168. A call's 0.0512 s on the cores waits for them, busy 0.9168 s of the
		// 1.9984 s epoch: ×1/(1−ρ⁴).
		name: "lambda shared", c: Config{Backend: Lambda, GraphServers: 2, Intervals: 2, Concurrency: 2, MemoryMB: 3008, UpdateEvery: jobconfig.UpdateIntervals(1)},
		m: Machine{SharedCores: 4, ExtraLatency: 20 * time.Millisecond},
		want: Prediction{EpochSeconds: 1.9984, WorkSeconds: 0.9168, CallsSeconds: 4 * (0.12 + 0.0512/(1-math.Pow(0.9168/1.9984, 4))), ChainSeconds: 1.4464,
			GateSeconds: 0.052, Calls: 16, CallSeconds: 0.12 + 0.0512/(1-math.Pow(0.9168/1.9984, 4))},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Predict(tiny, tc.c, tc.m, round)
			if err != nil {
				t.Fatal(err)
			}
			g, w := []float64{got.EpochSeconds, got.WorkSeconds, got.ParamSeconds, got.CallsSeconds, got.ChainSeconds, got.GateSeconds, got.Calls, got.CallSeconds},
				[]float64{tc.want.EpochSeconds, tc.want.WorkSeconds, tc.want.ParamSeconds, tc.want.CallsSeconds, tc.want.ChainSeconds, tc.want.GateSeconds, tc.want.Calls, tc.want.CallSeconds}
			for i := range g {
				if !near(g[i], w[i]) {
					t.Fatalf("Predict = %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

func TestPredictRejects(t *testing.T) {
	ok := Config{Backend: Lambda, GraphServers: 1, Intervals: 1, Concurrency: 1, MemoryMB: 1024}
	m := Machine{SharedCores: 2}
	for name, tc := range map[string]struct {
		w   Workload
		c   Config
		m   Machine
		err error
	}{
		"no vertices":      {Workload{Features: 1, Classes: 2, Model: tiny.Model}, ok, m, ErrWorkload},
		"unknown model":    {Workload{Vertices: 1, Features: 1, Classes: 2, Model: Model{Architecture: "mlp", Layers: 1, Hidden: 1}}, ok, m, ErrWorkload},
		"graphsage":        {Workload{Vertices: 1, Features: 1, Classes: 2, Model: Model{Architecture: "graphsage", Layers: 1, Hidden: 1}}, ok, m, ErrWorkload},
		"gat no heads":     {Workload{Vertices: 1, Features: 1, Classes: 2, Model: Model{Architecture: GAT, Layers: 1, Hidden: 1}}, ok, m, ErrWorkload},
		"no intervals":     {tiny, Config{Backend: CPU, GraphServers: 1}, m, ErrConfig},
		"staleness":        {tiny, Config{Backend: CPU, GraphServers: 1, Intervals: 1, Staleness: jobconfig.Sync}, m, ErrConfig},
		"no concurrency":   {tiny, Config{Backend: Knative, GraphServers: 1, Intervals: 1}, m, ErrConfig},
		"memory":           {tiny, Config{Backend: Lambda, GraphServers: 1, Intervals: 1, Concurrency: 1, MemoryMB: 64}, m, ErrConfig},
		"backend":          {tiny, Config{Backend: "gpu", GraphServers: 1, Intervals: 1}, m, ErrConfig},
		"no cores":         {tiny, ok, Machine{}, ErrConfig},
		"negative latency": {tiny, ok, Machine{SharedCores: 1, ExtraLatency: -1}, ErrConfig},
	} {
		if _, err := Predict(tc.w, tc.c, tc.m, round); !errors.Is(err, tc.err) {
			t.Errorf("%s: Predict error %v, want %v", name, err, tc.err)
		}
	}
}

func TestEstimatePart(t *testing.T) {
	if got := EstimatePart(1000, 8000, 1); got != (Part{Vertices: 1000, Entries: 9000}) {
		t.Errorf("1 part: %+v", got)
	}
	// 2 parts: 500 own vertices, 4000 + 500 entries; 2000 of its 4000 entries reach the other
	// 500 vertices: 500·(1 - e^-4) ≈ 490.8 ghosts.
	if got := EstimatePart(1000, 8000, 2); got != (Part{Vertices: 500, Entries: 4500, Ghosts: 491}) {
		t.Errorf("2 parts: %+v", got)
	}
}

func TestCalibrationFile(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("the shipped calibration: %v", err)
	}
	var b strings.Builder
	if err := round.Write(&b); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCalibration(strings.NewReader(b.String())); err != nil || got != round {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	for name, in := range map[string]string{
		"unknown field":  strings.Replace(b.String(), `"elementSeconds"`, `"elementSecond"`, 1),
		"negative":       strings.Replace(b.String(), `"taskSeconds": 0.01`, `"taskSeconds": -0.01`, 1),
		"zero rate":      strings.Replace(b.String(), `"bytesPerSecond": 1000`, `"bytesPerSecond": 0`, 1),
		"no command":     strings.Replace(b.String(), `"command": "test"`, `"command": ""`, 1),
		"not json":       "workFactor: 1",
		"missing fields": `{"measured": "2026-12-05", "command": "x"}`,
	} {
		if _, err := ReadCalibration(strings.NewReader(in)); !errors.Is(err, ErrCalibration) {
			t.Errorf("%s: error %v, want ErrCalibration", name, err)
		}
	}
}

// A call's latency waits on its interval's chain, in step with the other intervals' and S+1
// epochs of it in flight: it sets the epoch only when it outlasts S times the work, and then
// does not depend on the intervals. The weights' round trips at the epoch gate add 1/(S+1) of
// an interval's to the epoch, however long the work.
func TestLatencyOverlaps(t *testing.T) {
	cal := round
	cal.TaskSeconds, cal.EpochSeconds, cal.RoundTripSeconds, cal.RoundTripByteSeconds = 0, 0, 0, 0
	predict := func(c Config, latency float64, cal Calibration) Prediction {
		m := Machine{ServerCores: 2, ParamServerCores: 4, ExtraLatency: time.Duration(latency * float64(time.Second))}
		p, err := Predict(tiny, c, m, cal)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ intervals, staleness int }{{2, 1}, {8, 1}, {2, 0}, {2, 3}} {
		c := Config{Backend: CPU, GraphServers: 1, Intervals: tc.intervals, Staleness: jobconfig.Bounded(tc.staleness), UpdateEvery: jobconfig.UpdateIntervals(1)}
		work := predict(c, 0, cal).WorkSeconds
		inFlight := float64(tc.staleness + 1)
		// 4 calls an interval (AV and ∇AV of 2 layers)
		if tc.staleness > 0 {
			if hidden := 0.9 * float64(tc.staleness) * work / 4; predict(c, hidden, cal).EpochSeconds != work {
				t.Errorf("%s: calls %.3g s long: epoch %v, want the work's %v", c, hidden, predict(c, hidden, cal).EpochSeconds, work)
			}
		}
		if p := predict(c, 10*work, cal); !near(p.EpochSeconds, (4*10*work+work)/inFlight) {
			t.Errorf("%s: calls %.3g s long: epoch %v, want (4 calls + the work)/(S+1) = %v", c, 10*work, p.EpochSeconds, (4*10*work+work)/inFlight)
		}
		gated := cal
		gated.RoundTripSeconds = 10 * work
		if p := predict(c, 0, gated); !near(p.EpochSeconds, work+2*10*work/inFlight) {
			t.Errorf("%s: round trips %.3g s long: epoch %v, want the work + 2 round trips/(S+1) = %v", c, 10*work, p.EpochSeconds, work+2*10*work/inFlight)
		}
		// One update an epoch: the server's push and pull, an interval's share of them on
		// its chain, and half the weights' work of each interval's push and pull.
		c.UpdateEvery = jobconfig.UpdateEvery{}
		lessWork := work - (1-1/float64(tc.intervals))*float64(tc.intervals)*tiny.Weights()*cal.ParamSeconds/2
		if p := predict(c, 0, gated); !near(p.EpochSeconds, lessWork+2*10*work/float64(tc.intervals)/inFlight) {
			t.Errorf("%s: round trips %.3g s long: epoch %v, want the work + 2/%d round trips/(S+1) = %v", c, 10*work, p.EpochSeconds, tc.intervals, lessWork+2*10*work/float64(tc.intervals)/inFlight)
		}
	}
}

// On a shared machine a function call's core time waits for the cores the work keeps busy:
// when the calls set the epoch, it is the epoch at which each call takes its latency plus
// its core time stretched as an M/M/2 queue's response time at the busy fraction work/epoch.
func TestCallsQueueOnSharedCores(t *testing.T) {
	// one call at a time per server, 0.4 s of latency each: 8 calls an epoch; a call's
	// 0.0512 s of core time as in TestPredict's "lambda shared"
	c := Config{Backend: Lambda, GraphServers: 2, Intervals: 2, Concurrency: 1, MemoryMB: 3008, UpdateEvery: jobconfig.UpdateIntervals(1)}
	p, err := Predict(tiny, c, Machine{SharedCores: 2, ExtraLatency: 300 * time.Millisecond}, round)
	if err != nil {
		t.Fatal(err)
	}
	if !near(p.EpochSeconds, p.CallsSeconds+p.GateSeconds+round.EpochSeconds) {
		t.Fatalf("Predict = %+v: want the calls' bound to set the epoch", p)
	}
	busy := p.WorkSeconds / p.EpochSeconds
	if want := 0.4 + 0.0512/(1-busy*busy); !near(p.CallSeconds, want) || !near(p.CallsSeconds, 8*want) || busy < 0.3 {
		t.Errorf("Predict = %+v: want a call of 0.4 s + 0.0512 s/(1−ρ²) = %v at ρ = %.3f, and 8 of them", p, want, busy)
	}
}

// Fit recovers the coefficients of synthetic runs, whichever bound sets each run's epoch.
func TestFit(t *testing.T) {
	truth := Calibration{Measured: "2026-12-05", Command: "test", GatherSecondsPerMAC: 1e-9, FeatureSecondsPerMAC: 2e-9, FlopSeconds: 1e-10, BytesPerSecond: 1e9,
		ElementSeconds: 3e-9, FeatureElementSeconds: 5e-9, TaskSeconds: 4e-5, MessageSeconds: 1e-4, ParamSeconds: 4e-8, EpochSeconds: 1e-3,
		RoundTripSeconds: 2e-3, RoundTripByteSeconds: 2e-8, CallSeconds: 5e-3, CallCoreSeconds: 3e-3, CallByteSeconds: 2e-8}
	shared := Machine{SharedCores: 2}
	small := Workload{Vertices: 3000, Entries: 12000, Features: 3000, FeatureEntries: 100000, Classes: 6, Model: Model{Architecture: GCN, Layers: 2, Hidden: 16}}
	dense := Workload{Vertices: 20000, Entries: 400000, Features: 32, Classes: 8, Model: Model{Architecture: GCN, Layers: 2, Hidden: 16}}
	tinyGraph := Workload{Vertices: 4000, Entries: 20000, Features: 8, Classes: 4, Model: Model{Architecture: GCN, Layers: 2, Hidden: 16}}
	wide := small
	wide.Model.Hidden = 64
	cpu := func(w Workload, p, i int) (Workload, Config) {
		return w, Config{Backend: CPU, GraphServers: p, Intervals: i, Staleness: jobconfig.Bounded(1)}
	}
	fn := func(w Workload, p, i int) (Workload, Config) {
		return w, Config{Backend: Lambda, GraphServers: p, Intervals: i, Concurrency: i, MemoryMB: 3008, Staleness: jobconfig.Bounded(1)}
	}
	var runs []Run
	bound := map[string]bool{}
	for _, r := range []func() (Workload, Config){
		func() (Workload, Config) { return cpu(small, 1, 2) }, func() (Workload, Config) { return cpu(small, 1, 16) },
		func() (Workload, Config) { return cpu(small, 2, 4) }, func() (Workload, Config) { return cpu(small, 4, 4) },
		func() (Workload, Config) { return cpu(wide, 1, 4) }, func() (Workload, Config) { return cpu(dense, 1, 4) },
		func() (Workload, Config) { return cpu(dense, 2, 8) }, func() (Workload, Config) { return cpu(tinyGraph, 1, 1) },
		func() (Workload, Config) { return cpu(tinyGraph, 1, 16) }, func() (Workload, Config) { return cpu(tinyGraph, 2, 1) },
		func() (Workload, Config) { return fn(small, 1, 1) }, func() (Workload, Config) { return fn(small, 1, 2) },
		func() (Workload, Config) { return fn(small, 2, 2) },
	} {
		w, c := r()
		p, err := Predict(w, c, shared, truth)
		if err != nil {
			t.Fatal(err)
		}
		bound[boundName(p)] = true
		runs = append(runs, Run{Workload: w, Config: c, Machine: shared, EpochSeconds: p.EpochSeconds})
	}
	if !bound["work"] || !bound["chain"] || !bound["calls"] {
		t.Fatalf("the synthetic runs' bounds %v: want work, chain and calls", bound)
	}
	start := truth
	for _, p := range start.fitted() {
		*p = 0
	}
	got, err := Fit(start, runs)
	if err != nil {
		t.Fatal(err)
	}
	g, w := got.fitted(), truth.fitted()
	for k := range g {
		if math.Abs(*g[k]-*w[k]) > 1e-6**w[k] {
			t.Fatalf("Fit = %+v, want %+v", got, truth)
		}
	}
	if _, err := Fit(start, runs[:5]); !errors.Is(err, ErrCalibration) { // 8 coefficients of the cpu backend
		t.Errorf("5 runs: error %v, want ErrCalibration", err)
	}
}

// boundName names the largest bound of p.
func boundName(p Prediction) string {
	switch max(p.WorkSeconds, p.ParamSeconds, p.CallsSeconds, p.ChainSeconds) {
	case p.WorkSeconds:
		return "work"
	case p.ParamSeconds:
		return "params"
	case p.CallsSeconds:
		return "calls"
	}
	return "chain"
}

func TestChoose(t *testing.T) {
	w := Workload{Vertices: 1_000_000, Entries: 20_000_000, Features: 128, Classes: 16, Model: Model{Architecture: GCN, Layers: 2, Hidden: 128}}
	pr := Pricing{Prices: cost.Default, GraphServerInstance: "r5.xlarge", ParameterServerInstance: "c5.xlarge", ParameterServers: 1} // 32 GiB each
	cal := round
	cal.GatherSecondsPerMAC, cal.FlopSeconds, cal.TaskSeconds, cal.MessageSeconds, cal.ParamSeconds, cal.EpochSeconds = 1e-9, 1e-10, 1e-3, 1e-3, 1e-8, 0
	s := Space{Backends: []Backend{CPU}, GraphServers: []int{1, 2, 4}, Intervals: []int{4}}
	opts, best, err := Choose(w, s, Machine{}, cal, pr, Goal{Epochs: 100, Objective: Value})
	if err != nil || !best || len(opts) != 3 {
		t.Fatalf("Choose: %d options, best %v, %v", len(opts), best, err)
	}
	for i := 1; i < len(opts); i++ { // best value first
		if opts[i].EpochsPerUSD > opts[0].EpochsPerUSD {
			t.Errorf("option %d (%s) has more value than the choice (%s)", i, opts[i].Config, opts[0].Config)
		}
	}
	fastest := opts[0]
	for _, o := range opts {
		if o.TotalSeconds < fastest.TotalSeconds {
			fastest = o
		}
	}
	byTime, _, err := Choose(w, s, Machine{}, cal, pr, Goal{Epochs: 100, Objective: Time})
	if err != nil || byTime[0].Config != fastest.Config {
		t.Errorf("objective time chose %s, want %s (%v)", byTime[0].Config, fastest.Config, err)
	}
	// A deadline only the fastest meets.
	deadline := time.Duration(fastest.TotalSeconds*float64(time.Second)) + time.Millisecond
	opts, best, err = Choose(w, s, Machine{}, cal, pr, Goal{Epochs: 100, Deadline: deadline, Objective: Value})
	if err != nil || !best || opts[0].Config != fastest.Config || opts[1].Meets {
		t.Errorf("deadline %v: chose %s (best %v, %v), want %s alone", deadline, opts[0].Config, best, err, fastest.Config)
	}
	if _, best, _ = Choose(w, s, Machine{}, cal, pr, Goal{Epochs: 100, BudgetUSD: 1e-9, Objective: Value}); best {
		t.Error("a budget of 1e-9 USD: a configuration meets it")
	}
	// On 8 GiB instances one graph server holding a sparser graph of 2M vertices does not fit;
	// four do (on the denser one a quarter's ghosts are most of the graph).
	small, large := pr, w
	small.GraphServerInstance = "c5.xlarge"
	large.Vertices, large.Entries = 2_000_000, 4_000_000
	opts, _, err = Choose(large, s, Machine{}, cal, small, Goal{Epochs: 100, Objective: Time})
	for _, o := range opts {
		fits := o.GraphServerBytes <= 8<<30
		if err != nil || o.Fits != fits || o.Meets != fits {
			t.Errorf("8 GiB graph servers: %s needs %.1f GiB, fits %v, meets the goal %v (%v)", o.Config, o.GraphServerBytes/(1<<30), o.Fits, o.Meets, err)
		}
		if o.Config.GraphServers == 1 && fits || o.Config.GraphServers == 4 && !fits {
			t.Errorf("8 GiB graph servers: %s needs %.1f GiB; want 1 graph server not to fit and 4 to", o.Config, o.GraphServerBytes/(1<<30))
		}
	}
	// On one shared machine all graph servers count.
	shared := Machine{SharedCores: 2, SharedMemoryBytes: 12 << 30}
	if opts, _, err = Choose(w, s, shared, cal, pr, Goal{Epochs: 100, Objective: Value}); err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		if fits := float64(o.Config.GraphServers)*o.GraphServerBytes <= 12<<30; o.Fits != fits {
			t.Errorf("a shared 12 GiB machine: %s, %.1f GiB per graph server: fits %v, want %v", o.Config, o.GraphServerBytes/(1<<30), o.Fits, fits)
		}
	}
	for name, g := range map[string]Goal{"no epochs": {Objective: Value}, "negative budget": {Epochs: 1, BudgetUSD: -1, Objective: Value}, "objective": {Epochs: 1, Objective: "speed"}} {
		if _, _, err := Choose(w, s, Machine{}, cal, pr, g); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: error %v, want ErrConfig", name, err)
		}
	}
	if _, _, err := Choose(w, Space{Backends: []Backend{CPU}, GraphServers: []int{0}, Intervals: []int{1}}, Machine{}, cal, pr, Goal{Epochs: 1, Objective: Value}); !errors.Is(err, ErrConfig) {
		t.Errorf("0 graph servers: error %v, want ErrConfig", err)
	}
}

func TestSpaceConfigs(t *testing.T) {
	s := Space{Backends: []Backend{CPU, Lambda, Knative}, GraphServers: []int{1, 2}, Intervals: []int{4}, ConcurrencyPerInterval: []int{1, 2}, MemoriesMB: []int{1769, 3008}}
	// cpu: 2; knative: 2·2; lambda: 2·2·2
	if got := len(s.Configs()); got != 14 {
		t.Errorf("%d configurations, want 14", got)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
	s.Backends = append(s.Backends, "tpu")
	if err := s.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("tpu: error %v, want ErrConfig", err)
	}
}

// The planner's memory is the graph server's own prediction (graphserver.Footprint) of the
// heaviest part, with an evaluation pass beside training, and grows as the README's table
// says: the epochs kept with S, the widths, a GAT's attention per entry, a GraphSAGE's S_l.
func TestGraphServerBytes(t *testing.T) {
	w := Workload{Vertices: 1_000_000, Entries: 20_000_000, Features: 32, Classes: 16,
		Model: Model{Architecture: GCN, Layers: 2, Hidden: 32},
		Cuts:  map[int]Part{4: {Vertices: 562_464, Entries: 4_462_534, Ghosts: 207_580}}}
	c := Config{Backend: CPU, GraphServers: 4, Intervals: 4, Staleness: jobconfig.Bounded(1)}
	got := w.GraphServerBytes(c)
	f := graphserver.Footprint{Owned: 562_464, Ghosts: 207_580, Entries: 4_462_534, Dims: []int{32, 32, 16},
		Staleness: jobconfig.Bounded(1), Intervals: 4, Evaluates: true}
	if want := f.Bytes(); got != want {
		t.Errorf("graph server 3 of R-MAT 1M/20M on 4 parts: %.0f bytes, graphserver.Footprint %.0f", got, want)
	}
	sync := c
	sync.Staleness = jobconfig.Bounded(0)
	wide := w
	wide.Model.Hidden = 64
	if s := w.GraphServerBytes(sync); s >= got {
		t.Errorf("S = 0: %.0f bytes, not below S = 1's %.0f", s, got)
	}
	if x := wide.GraphServerBytes(c); x <= got {
		t.Errorf("hidden 64: %.0f bytes, not above hidden 32's %.0f", x, got)
	}
	gat := w
	gat.Model = Model{Architecture: GAT, Layers: 2, Hidden: 4, Heads: 8}
	if x := gat.GraphServerBytes(c); x <= got {
		t.Errorf("GAT 8 heads of 4: %.0f bytes, not above the GCN's %.0f (its per-entry attention)", x, got)
	}
	sage := w
	sage.Model.Architecture = SAGE
	if x := sage.GraphServerBytes(c); x <= got {
		t.Errorf("GraphSAGE: %.0f bytes, not above the GCN's %.0f (its S_l and M)", x, got)
	}
}

// The parameter servers' memory is each shard's fixed 42 MiB and every weight once in all, in
// its versions (1 synchronous, S+2 at staleness S), Adam's two moments and the gradient.
func TestParamServersBytes(t *testing.T) {
	w := Workload{Vertices: 1000, Entries: 10_000, Features: 32, Classes: 16, Model: Model{Architecture: GCN, Layers: 2, Hidden: 32}}
	weights := 32.0*32 + 32*16
	for _, c := range []struct {
		st       jobconfig.Staleness
		versions float64
	}{{jobconfig.Sync, 1}, {jobconfig.Bounded(1), 3}} {
		if got, want := w.ParamServersBytes(Config{Staleness: c.st}, 2), 2*42<<20+4*weights*(c.versions+3); !near(got, want) {
			t.Errorf("2 parameter servers at staleness %v: %.0f bytes, want %.0f", c.st, got, want)
		}
	}
	if got := w.ParamServersBytes(Config{Staleness: jobconfig.Sync}, 0); got != 0 {
		t.Errorf("no parameter servers: %.0f bytes", got)
	}
}
