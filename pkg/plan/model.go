package plan

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Backend is where the tensor tasks run.
type Backend string

// The tensor backends (pkg/dispatch).
const (
	CPU     Backend = "cpu"
	Lambda  Backend = "lambda"
	Knative Backend = "knative"
)

// lambdaMBPerVCPU is the memory for which Lambda allots one vCPU (it allots CPU in
// proportion to memory, up to 6 vCPUs at 10240 MB).
const (
	lambdaMBPerVCPU = 1769
	lambdaMaxVCPUs  = 6
)

// Config is one configuration of a run.
type Config struct {
	Backend      Backend `json:"backend"`
	GraphServers int     `json:"graphServers"`
	Intervals    int     `json:"intervals"` // per graph server
	// Concurrency is the most calls in flight per graph server (functions only).
	Concurrency int `json:"concurrency,omitempty"`
	MemoryMB    int `json:"memoryMB,omitempty"` // Lambda's function memory
	// Staleness is the bound S of the asynchronous pipeline: an interval has up to S+1
	// epochs in flight. The synchronous mode is not modelled.
	Staleness jobconfig.Staleness `json:"staleness"`
	// UpdateEvery is the update granularity (its zero value: one update per graph server per
	// epoch): each update is a push and a pull of every weight, and an Adam step of them.
	UpdateEvery jobconfig.UpdateEvery `json:"updateEvery"`
	// Placement is jobconfig.PlacementAuto, a run's default, which places the tensor tasks by
	// cost (Workload.placedLocally), or, empty or PlacementRemote, every task a call (the
	// calibration runs').
	Placement string `json:"placement,omitempty"`
}

// String names the configuration on one line (the update granularity when not the default).
func (c Config) String() string {
	s := fmt.Sprintf("%s gs=%d intervals=%d S=%v", c.Backend, c.GraphServers, c.Intervals, c.Staleness)
	if c.UpdateEvery != (jobconfig.UpdateEvery{}) {
		s += fmt.Sprintf(" updates=%v", c.UpdateEvery)
	}
	switch c.Backend {
	case Lambda:
		s += fmt.Sprintf(" concurrency=%d memory=%dMB", c.Concurrency, c.MemoryMB)
	case Knative:
		s += fmt.Sprintf(" concurrency=%d", c.Concurrency)
	}
	return s
}

// Machine is where a run's processes run.
type Machine struct {
	// SharedCores, when above 0, is the number of cores of the one machine every graph
	// server and every function shares (dorylus train on one host, functions in emulators).
	SharedCores int
	// ServerCores and ParamServerCores are the cores of each graph server and of all the
	// parameter servers, each on its own instances, when SharedCores is 0.
	ServerCores, ParamServerCores int
	// ExtraLatency is added to every tensor call: the network to real functions, or the
	// latency dorylus train --inject-latency adds.
	ExtraLatency time.Duration
	// ServerMemoryBytes is each graph server's memory, or with SharedCores SharedMemoryBytes
	// that of the one machine all share (0: not bounded).
	ServerMemoryBytes, SharedMemoryBytes float64
}

// fits reports whether graph servers of bytes each fit the machine's memory.
func (m Machine) fits(servers int, bytes float64) bool {
	if m.SharedCores > 0 {
		return m.SharedMemoryBytes == 0 || float64(servers)*bytes <= m.SharedMemoryBytes
	}
	return m.ServerMemoryBytes == 0 || bytes <= m.ServerMemoryBytes
}

// ErrConfig is wrapped by the errors of a configuration or machine that cannot be modelled.
var ErrConfig = errors.New("plan: invalid configuration")

func (c Config) validate(m Machine) error {
	switch {
	case c.GraphServers < 1 || c.Intervals < 1 || c.Staleness.Sync():
		return fmt.Errorf("%w: %d graph servers, %d intervals, staleness %v: want at least 1 server and interval, a staleness bound S (the synchronous mode is not modelled)", ErrConfig, c.GraphServers, c.Intervals, c.Staleness)
	case c.Backend != CPU && c.Backend != Lambda && c.Backend != Knative:
		return fmt.Errorf("%w: backend %q: want cpu, lambda or knative", ErrConfig, c.Backend)
	case c.Backend != CPU && c.Concurrency < 1:
		return fmt.Errorf("%w: %s with concurrency %d: want at least 1", ErrConfig, c.Backend, c.Concurrency)
	case c.Backend == Lambda && (c.MemoryMB < 128 || c.MemoryMB > 10240):
		return fmt.Errorf("%w: lambda memory %d MB: want 128 to 10240", ErrConfig, c.MemoryMB)
	case m.SharedCores < 0 || (m.SharedCores == 0 && (m.ServerCores < 1 || m.ParamServerCores < 1)):
		return fmt.Errorf("%w: machine %+v: want shared cores, or the cores of the graph and the parameter servers", ErrConfig, m)
	case m.ExtraLatency < 0:
		return fmt.Errorf("%w: negative call latency %v", ErrConfig, m.ExtraLatency)
	}
	return nil
}

// Epoch is the count of one epoch's work on the heaviest graph server.
type Epoch struct {
	GraphMACs  float64 // sparse multiply-adds of GA and ∇GA (GAT: and the attention per entry)
	TensorMACs float64 // sparse multiply-adds of AV and ∇AV on sparse features
	Flops      float64 // dense flops of AV and ∇AV
	Tasks      float64 // tasks scheduled
	// Calls are the tensor calls: AV and ∇AV of every layer (GAT: also AE and ∇AE;
	// GraphSAGE: each twice, once per weight half); the loss runs on the graph server.
	Calls float64
	// ParamUpdates counts each weight element once per update (Count: one per interval;
	// withUpdates: per Config.UpdateEvery): fetched for AV and ∇AV, its gradient pushed and
	// applied by the parameter server.
	ParamUpdates float64
	// Elements are the dense activation elements the tensor tasks touch outside the products
	// (dropout, ReLU, softmax, copies): each layer's input, output and aggregate, forward
	// and backward; FeatureElements the sparse features' non-zeros they touch so.
	Elements        float64
	FeatureElements float64
	GhostBytes      float64 // bytes scattered to and from ghosts (SC, and the backward gradient rows: a GCN's dZ, a GAT's ∇SC)
	Messages        float64 // messages of SC and of the backward gradient rows: one to every other graph server
	PayloadBytes    float64 // bytes of the tensor calls' requests and replies
	// RoundTrips are the round trips to the parameter servers at the epoch gate: each
	// update's gradient push (WU) and weight pull; RoundTripBytes the bytes they carry.
	// Scatters are the round trips to the other graph servers: each interval's SC and its
	// gradient rows back (a GCN's dZ, a GAT's ∇SC) of every layer (to every peer at once),
	// carrying GhostBytes.
	RoundTrips     float64
	RoundTripBytes float64
	Scatters       float64
}

// Count counts the work of one epoch of w on the heaviest of parts graph servers with
// intervals intervals each. As pkg/model computes them, a layer transforms first (AV: P = H W,
// a sparse product for sparse features) and then aggregates at the output width (GA: Â P);
// backward, ∇GA aggregates dZ and ∇AV computes dW = Hᵀ dP and, above the first layer, dH.
// An interval's epoch is 6L+2 tasks (pipeline.Sequence): AV, SC, GA per layer, the loss (an
// AV), ∇GA, ∇SC, ∇AV per layer and WU; GAT's attention runs inside GA and ∇GA. A GraphSAGE's
// AV and ∇AV are a GCN's, once per half of [W_self; W_neigh] (runtime/graphserver, sage.go):
// twice the products, element-wise work, weight elements, calls and payload; its Gather
// (M = D⁻¹A on Â's structure) and its scatters are a GCN's.
func (w Workload) Count(parts, intervals int) Epoch {
	p := w.Part(parts)
	ws := w.widths()
	L := len(ws) - 1
	e, g := float64(p.Entries), float64(p.Ghosts)
	var n Epoch
	var k tensorWork // the tensor tasks' work, of one GCN op each
	var graphMACs, ghostBytes float64
	for l := 1; l <= L; l++ {
		for _, back := range []bool{false, true} {
			k = k.plus(w.task(p, intervals, l, back).count().times(float64(intervals)))
		}
		out := float64(ws[l])
		graphMACs += 2 * e * out // GA and ∇GA
		if w.Model.Architecture == GAT {
			graphMACs += 2 * 4 * e * float64(w.headsOf(l)) // AE and ∇AE: a score and its softmax per entry and head
		}
		ghostBytes += 2 * 4 * g * out // SC, and the gradient rows back
	}
	I, fL := float64(intervals), float64(L)
	n.Calls = I * 2 * fL
	if w.Model.Architecture == GAT {
		n.Calls *= 2
	}
	n.Calls *= float64(w.Model.halves())
	n = n.withTensor(k.times(float64(w.Model.halves())))
	n.GraphMACs, n.GhostBytes = graphMACs, ghostBytes
	n.Tasks = I * (6*fL + 2)
	n.ParamUpdates = I * w.Weights()
	n.RoundTrips, n.RoundTripBytes = I*2, 2*4*n.ParamUpdates
	if parts > 1 {
		n.Scatters = I * 2 * fL
		n.Messages = n.Scatters * float64(parts-1)
	}
	return n
}

// tensor returns the work of n's tensor tasks.
func (n Epoch) tensor() tensorWork {
	return tensorWork{n.TensorMACs, n.Flops, n.Elements, n.FeatureElements, n.PayloadBytes}
}

// withTensor returns n with k the work of its tensor tasks.
func (n Epoch) withTensor(k tensorWork) Epoch {
	n.TensorMACs, n.Flops, n.Elements, n.FeatureElements, n.PayloadBytes = k.macs, k.flops, k.elements, k.featureElements, k.bytes
	return n
}

// withUpdates returns n, as Count counts it (an update per interval), with the weight traffic
// of updates per graph server and epoch instead (jobconfig.UpdateEvery.PerEpoch of intervals).
// The graph server's sums of its intervals' gradients are not counted: one addition per weight
// element and interval, against the products that made each gradient.
func (n Epoch) withUpdates(updates, intervals int) Epoch {
	f := float64(updates) / float64(intervals)
	n.ParamUpdates, n.RoundTrips, n.RoundTripBytes = f*n.ParamUpdates, f*n.RoundTrips, f*n.RoundTripBytes
	return n
}

// kernelSeconds returns the core-seconds of the graph and of the tensor kernels of n at the
// micro-benchmarks' costs.
func (n Epoch) kernelSeconds(cal Calibration) (graph, tensor float64) {
	return n.GraphMACs * cal.GatherSecondsPerMAC, n.TensorMACs*cal.FeatureSecondsPerMAC + n.Flops*cal.FlopSeconds
}

// coresPerServer returns the cores each of servers graph servers has on m.
func (m Machine) coresPerServer(servers int) float64 {
	if m.SharedCores > 0 {
		return float64(m.SharedCores) / float64(servers)
	}
	return float64(m.ServerCores)
}

// headsOf returns the attention heads of layer l (1-based): the output layer has one.
func (w Workload) headsOf(l int) int {
	if l == w.Model.Layers {
		return 1
	}
	return w.Model.Heads
}

// Prediction is the predicted time of one epoch and the bounds it is the largest of.
type Prediction struct {
	EpochSeconds float64 `json:"epochSeconds"`
	WorkSeconds  float64 `json:"workSeconds"`  // the graph servers' cores
	ParamSeconds float64 `json:"paramSeconds"` // the parameter servers' cores
	CallsSeconds float64 `json:"callsSeconds"` // the functions' concurrency
	ChainSeconds float64 `json:"chainSeconds"` // one interval's latencies in series with the work
	// GateSeconds is the weights' round trips at the epoch gate, which no bound hides.
	GateSeconds float64 `json:"gateSeconds"`
	// Calls are the tensor calls of one epoch over all graph servers, each of CallSeconds;
	// LocalTasks the tensor tasks placement runs in the graph servers instead.
	Calls       float64 `json:"calls"`
	CallSeconds float64 `json:"callSeconds"`
	LocalTasks  float64 `json:"localTasks"`
}

// bounds are an epoch's bounds (the package comment) and one call's time, each a function
// of the fitted coefficients.
type bounds struct {
	work, param, calls, chain linear
	gate                      linear // added to the largest
	call                      linear
	callCount                 float64 // over all graph servers
	localTasks                float64 // over all graph servers
}

// boundsOf returns the bounds of an epoch of w in configuration c on machine m.
func boundsOf(w Workload, c Config, m Machine, cal Calibration) (bounds, error) {
	if err := w.Validate(); err != nil {
		return bounds{}, err
	}
	if err := c.validate(m); err != nil {
		return bounds{}, err
	}
	n := w.Count(c.GraphServers, c.Intervals).withUpdates(c.UpdateEvery.PerEpoch(c.Intervals), c.Intervals)
	// the tasks placed in the graph server leave the calls: their compute is the server's
	local, localTasks := w.placedLocally(c, m, cal)
	n = n.withTensor(n.tensor().plus(local.times(-1)))
	n.Calls -= localTasks
	P, I := float64(c.GraphServers), float64(c.Intervals)
	graphK, _ := n.kernelSeconds(cal)
	// core-seconds: the graph tasks, the scheduling of all, the scatters; the tensor tasks'
	// products and element-wise work (those of the calls, and those placed in the server); the
	// weights fetched, pushed and applied
	graph := sum(constant(graphK), term(taskC, n.Tasks), term(messageC, n.Messages), local.compute(cal))
	tensor := n.tensor().compute(cal)
	param := term(paramC, n.ParamUpdates)
	perCore := 1 / m.coresPerServer(c.GraphServers)
	network := constant(n.GhostBytes / cal.BytesPerSecond)
	shared := m.SharedCores > 0
	b := bounds{callCount: n.Calls * P, localTasks: localTasks * P}
	var callCore linear                           // of one function call, on the cores
	latency := constant(m.ExtraLatency.Seconds()) // of one call, beyond the work of the cores that run it
	switch {
	case n.Calls == 0: // every task in the graph server
		b.work = sum(graph, tensor, param).times(perCore).plus(network)
		latency = linear{}
	case c.Backend == CPU:
		b.work = sum(graph, tensor, param).times(perCore).plus(network)
		b.call = latency.plus(tensor.times(perCore / n.Calls))
	default:
		fnCores := 1.0 // an emulator's process, or the one vCPU a Knative call is priced as
		if c.Backend == Lambda && !shared {
			fnCores = min(float64(c.MemoryMB)/lambdaMBPerVCPU, lambdaMaxVCPUs)
		}
		overhead := sum(term(callCoreC, 1), term(callByteC, n.PayloadBytes/n.Calls)) // of one call, beyond its compute
		latency = latency.plus(term(callC, 1))
		callCore = sum(overhead, tensor.times(1/n.Calls/fnCores))
		b.call = sum(latency, callCore)
		b.calls = b.call.times(n.Calls / float64(c.Concurrency))
		b.work = sum(graph, param).times(perCore).plus(network)
		if shared { // the functions and their emulators run on the same cores
			b.work = b.work.plus(sum(tensor, overhead.times(n.Calls)).times(perCore))
		} else { // the call runs away from the graph server's cores
			latency = b.call
		}
	}
	if !shared { // every graph server's updates reach the parameter servers
		b.param = param.times(P / float64(m.ParamServerCores))
	}
	// One interval's chain: its scatters and its calls' latency, and the server's work, as
	// the epoch gate keeps the intervals in step (each stage of one waits for the cores to
	// run that stage of all), with S+1 epochs in flight. The gate opens an epoch once an
	// interval's WU is done, and its first AV waits for the pull of the version WU made: no
	// work overlaps those; an interval has its share of the server's updates.
	inFlight := 1 / float64(c.Staleness.Bound()+1)
	scatters := sum(term(roundTripC, n.Scatters/I), term(roundTripByteC, n.GhostBytes/I))
	b.chain = sum(scatters, latency.times(n.Calls/I), b.work).times(inFlight)
	b.gate = sum(term(roundTripC, n.RoundTrips/I), term(roundTripByteC, n.RoundTripBytes/I)).times(inFlight)
	if shared && c.Backend != CPU && n.Calls > 0 {
		b.queueCalls(cal, float64(m.SharedCores), latency, callCore, n.Calls/float64(c.Concurrency))
	}
	return b, nil
}

// maxBusy caps the busy fraction of queueCalls' cores: at 1 a queue never drains.
const maxBusy = 0.95

// queueCalls makes b's calls, on a shared machine, wait for its cores, which the work bound
// keeps busy a fraction ρ of the epoch: a call's core time c takes c/(1−ρᵐ) on m cores (the
// response time of an M/M/m queue: exact for m ≤ 2, close above). The epoch and ρ depend on
// each other, so queueCalls finds the epoch T at which the calls' bound, perServer calls of
// latency plus stretched core time, is T, unless the other bounds are longer. The stretch
// is a constant of the bounds at cal's coefficients (Fit recomputes it as they change).
func (b *bounds) queueCalls(cal Calibration, cores float64, latency, core linear, perServer float64) {
	work, fixed := b.work.at(cal), b.gate.at(cal)+cal.EpochSeconds
	lat, c := latency.at(cal), core.at(cal)
	stretch := func(t float64) float64 {
		busy := maxBusy
		if t+fixed > 0 {
			busy = min(work/(t+fixed), maxBusy)
		}
		return 1 / (1 - math.Pow(busy, cores))
	}
	calls := func(t float64) float64 { return perServer * (lat + c*stretch(t)) }
	// calls(t) falls as t grows: the epoch is the others' bound, or calls' fixed point above it
	t := max(work, b.param.at(cal), b.chain.at(cal))
	if hi := calls(t); hi > t {
		lo := t
		for range 100 {
			t = (lo + hi) / 2
			if calls(t) > t {
				lo = t
			} else {
				hi = t
			}
		}
		t = hi
	}
	b.call = sum(latency, core.times(stretch(t)))
	b.calls = b.call.times(perServer)
}

// list returns the bounds the largest of which sets the epoch.
func (b bounds) list() [4]linear { return [4]linear{b.work, b.param, b.calls, b.chain} }

// largest returns the index in list of the largest bound at cal's coefficients.
func (b bounds) largest(cal Calibration) int {
	l := b.list()
	k := 0
	for i, x := range l {
		if x.at(cal) > l[k].at(cal) {
			k = i
		}
	}
	return k
}

// epoch returns the largest bound at cal's coefficients as the epoch time: setBy of it.
func (b bounds) epoch(cal Calibration) linear { return b.setBy(b.list()[b.largest(cal)]) }

// setBy returns the epoch time when bound x is the largest: x plus the gate and the time per
// epoch.
func (b bounds) setBy(x linear) linear { return sum(x, b.gate, term(epochC, 1)) }

// Predict predicts one epoch of w in configuration c on machine m (see the package comment).
func Predict(w Workload, c Config, m Machine, cal Calibration) (Prediction, error) {
	b, err := boundsOf(w, c, m, cal)
	if err != nil {
		return Prediction{}, err
	}
	return Prediction{
		EpochSeconds: b.epoch(cal).at(cal),
		WorkSeconds:  b.work.at(cal), ParamSeconds: b.param.at(cal), CallsSeconds: b.calls.at(cal), ChainSeconds: b.chain.at(cal),
		GateSeconds: b.gate.at(cal),
		Calls:       b.callCount, CallSeconds: b.call.at(cal), LocalTasks: b.localTasks,
	}, nil
}
