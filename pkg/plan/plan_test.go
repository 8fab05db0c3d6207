package plan

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
)

// tiny is a workload whose counts are worked out by hand below: 2 layers 8 → 4 → 2, the
// heaviest of 2 parts with 10 vertices, 50 entries of Â and 4 ghosts.
var tiny = Workload{Vertices: 20, Entries: 80, Features: 8, Classes: 2,
	Model: Model{Architecture: GCN, Layers: 2, Hidden: 4}, Cuts: map[int]Part{2: {Vertices: 10, Entries: 50, Ghosts: 4}}}

// round is a calibration of round numbers.
var round = Calibration{Measured: "2026-12-05", Command: "test", GatherSecondsPerMAC: 1e-3, FeatureSecondsPerMAC: 2e-3, FlopSeconds: 1e-4,
	BytesPerSecond: 1000, ElementSeconds: 1e-4, FeatureElementSeconds: 2e-4, TaskSeconds: 1e-2, MessageSeconds: 1e-2, ParamSeconds: 1e-3, EpochSeconds: 0.5, CallSeconds: 0.1}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestCount(t *testing.T) {
	got := tiny.Count(2, 2)
	// layer 1 (8 → 4): flops 2·(2·10·8·4) = 1280, MACs 2·50·4 = 400, weights 2·8·4 = 64,
	// ghost bytes 2·4·4·4 = 128, payload 4·10·(3·8+2·4) = 1280; layer 2 (4 → 2): flops
	// 2·(2·10·4·2) + 2·10·4·2 = 480, MACs 2·50·2 = 200, weights 2·4·2 = 16, ghost bytes 64,
	// payload 4·10·(3·4+2·2) = 640; elements 2·(10·8 + 2·10·4) + 2·(10·4 + 2·10·2) = 480;
	// tasks 2·(6·2+2), calls 2·(2·2+1), messages 2·2·2·1.
	want := Epoch{GraphMACs: 600, Flops: 1760, Tasks: 28, Calls: 10, ParamUpdates: 80, Elements: 480, GhostBytes: 192, Messages: 8, PayloadBytes: 1920}
	if got != want {
		t.Errorf("Count = %+v, want %+v", got, want)
	}
	sparse := tiny
	sparse.FeatureEntries = 40 // 20 per part of 10 of the 20 vertices: 2·20·4 = 160 MACs of X W and Xᵀ dP
	// payload 4·(3·20 + 2·10·4) + 640 = 1200
	// elements 480 less the dense input of layer 1, 2·10·8; feature elements 2·20
	if got := sparse.Count(2, 2); got.TensorMACs != 160 || got.Flops != 480 || got.Elements != 320 || got.FeatureElements != 40 || got.PayloadBytes != 1200 {
		t.Errorf("sparse features: TensorMACs %v, Flops %v, Elements %v, FeatureElements %v, PayloadBytes %v; want 160, 480, 320, 40, 1200",
			got.TensorMACs, got.Flops, got.Elements, got.FeatureElements, got.PayloadBytes)
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
		// 0.224/10/2 = 0.0112 s each; chain (5·0.0112 + 0.96/2/2)/(S+1) = 0.148; parameter
		// servers 2·0.08/4.
		name: "cpu", c: Config{Backend: CPU, GraphServers: 2, Intervals: 2, Staleness: 1}, m: cluster,
		want: Prediction{EpochSeconds: 1.324, WorkSeconds: 0.824, ParamSeconds: 0.04, ChainSeconds: 0.148, Calls: 20, CallSeconds: 0.0112},
	}, {
		// a call: 0.1 + 1920/10/1000 + 0.224/10 on one vCPU = 0.3144; calls 10·0.3144/2 =
		// 1.572; chain (S = 0) 5·0.3144 + 0.24 = 1.812; work (0.96+0.08)/2 + 0.192 = 0.712.
		name: "lambda", c: Config{Backend: Lambda, GraphServers: 2, Intervals: 2, Concurrency: 2, MemoryMB: lambdaMBPerVCPU}, m: cluster,
		want: Prediction{EpochSeconds: 2.312, WorkSeconds: 0.712, ParamSeconds: 0.04, CallsSeconds: 1.572, ChainSeconds: 1.812, Calls: 20, CallSeconds: 0.3144},
	}, {
		// 4 shared cores, 2 per server: the functions' 0.224 core-s and their calls' 10·0.1
		// join the work; no
		// parameter-server bound of its own; 20 ms more per call.
		name: "lambda shared", c: Config{Backend: Lambda, GraphServers: 2, Intervals: 2, Concurrency: 2, MemoryMB: 3008},
		m:    Machine{SharedCores: 4, ExtraLatency: 20 * time.Millisecond},
		want: Prediction{EpochSeconds: 2.412, WorkSeconds: 1.324, CallsSeconds: 1.672, ChainSeconds: 1.912, Calls: 20, CallSeconds: 0.3344},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Predict(tiny, tc.c, tc.m, round)
			if err != nil {
				t.Fatal(err)
			}
			g, w := []float64{got.EpochSeconds, got.WorkSeconds, got.ParamSeconds, got.CallsSeconds, got.ChainSeconds, got.Calls, got.CallSeconds},
				[]float64{tc.want.EpochSeconds, tc.want.WorkSeconds, tc.want.ParamSeconds, tc.want.CallsSeconds, tc.want.ChainSeconds, tc.want.Calls, tc.want.CallSeconds}
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
		"gat no heads":     {Workload{Vertices: 1, Features: 1, Classes: 2, Model: Model{Architecture: GAT, Layers: 1, Hidden: 1}}, ok, m, ErrWorkload},
		"no intervals":     {tiny, Config{Backend: CPU, GraphServers: 1}, m, ErrConfig},
		"staleness":        {tiny, Config{Backend: CPU, GraphServers: 1, Intervals: 1, Staleness: -1}, m, ErrConfig},
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

func TestFit(t *testing.T) {
	truth := round
	shared := Machine{SharedCores: 2}
	var runs []Run
	for _, c := range []struct{ ds, p, i, h int }{{0, 1, 2, 4}, {0, 1, 16, 4}, {0, 2, 4, 4}, {0, 4, 4, 4}, {0, 1, 4, 32}, {1, 1, 4, 4}, {2, 1, 4, 4}} {
		w := tiny
		w.Cuts, w.Model.Hidden = nil, c.h
		switch c.ds {
		case 1:
			w.Vertices, w.Entries, w.Features = 500, 20000, 4
		case 2:
			w.Vertices, w.Features, w.FeatureEntries = 300, 1000, 9000
		}
		cfg := Config{Backend: CPU, GraphServers: c.p, Intervals: c.i}
		p, err := Predict(w, cfg, shared, truth)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, Run{Workload: w, Config: cfg, Machine: shared, EpochSeconds: p.EpochSeconds})
	}
	start := truth
	start.ElementSeconds, start.FeatureElementSeconds, start.TaskSeconds, start.MessageSeconds, start.ParamSeconds, start.EpochSeconds = 0, 0, 0, 0, 0, 0
	got, err := FitWork(start, runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]float64{{got.ElementSeconds, truth.ElementSeconds}, {got.FeatureElementSeconds, truth.FeatureElementSeconds}, {got.TaskSeconds, truth.TaskSeconds},
		{got.MessageSeconds, truth.MessageSeconds}, {got.ParamSeconds, truth.ParamSeconds}, {got.EpochSeconds, truth.EpochSeconds}} {
		if math.Abs(pair[0]-pair[1]) > 1e-6*pair[1] {
			t.Fatalf("FitWork = %+v, want %+v", got, truth)
		}
	}
	if _, err := FitWork(start, runs[:5]); !errors.Is(err, ErrCalibration) {
		t.Errorf("5 runs: error %v, want ErrCalibration", err)
	}

	c := Config{Backend: Lambda, GraphServers: 2, Intervals: 2, Concurrency: 2, MemoryMB: 3008}
	p, err := Predict(tiny, c, shared, truth)
	if err != nil {
		t.Fatal(err)
	}
	start = truth
	start.CallSeconds = 0
	got, err = FitCall(start, []Run{{Workload: tiny, Config: c, Machine: shared, EpochSeconds: p.EpochSeconds}})
	if err != nil || math.Abs(got.CallSeconds-truth.CallSeconds) > 1e-9 {
		t.Errorf("FitCall: %v, %v; want %v", got.CallSeconds, err, truth.CallSeconds)
	}
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
	// On 8 GiB instances one graph server holding the whole graph does not fit; four do.
	small := pr
	small.GraphServerInstance = "c5.xlarge"
	opts, _, err = Choose(w, s, Machine{}, cal, small, Goal{Epochs: 100, Objective: Time})
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

// The memory model predicts the graph server it was calibrated on, and grows as the README's
// table says: the epochs kept with S, the ghosts, the widths.
func TestGraphServerBytes(t *testing.T) {
	w := Workload{Vertices: 1_000_000, Entries: 20_000_000, Features: 32, Classes: 16,
		Model: Model{Architecture: GCN, Layers: 2, Hidden: 32},
		Cuts:  map[int]Part{4: {Vertices: 563_500, Entries: 4_700_000, Ghosts: 173_000}}}
	c := Config{Backend: CPU, GraphServers: 4, Intervals: 4, Staleness: 1}
	got := w.GraphServerBytes(c)
	if got < 3.2*(1<<30) || got > 3.8*(1<<30) {
		t.Errorf("graph server 3 of R-MAT 1M/20M on 4 parts: %.2f GiB predicted, 3.4 GiB measured", got/(1<<30))
	}
	sync := c
	sync.Staleness = 0
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
}
