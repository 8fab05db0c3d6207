package plan

import (
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Task is the shape of one GCN tensor task (AV or ∇AV of one layer, or one half of a
// GraphSAGE's) on one interval, as Count counts it and placement weighs it (Placing.Local).
type Task struct {
	Rows    float64 // rows of the interval (the planner's: a part's vertices over its intervals)
	In, Out int     // the layer's input width and the width of its P
	// FeatureEntries are the non-zeros of the rows' features when they are sparse (a first
	// layer's input; 0: dense).
	FeatureEntries float64
	Backward       bool // ∇AV: dW = Hᵀ dP and, above the first layer, dH = dP Wᵀ
	First          bool // layer 0: the input is the features, and ∇AV computes no dH
}

// tensorWork is the work of tensor tasks: the multiply-adds of sparse features and a weight,
// the dense flops, the element-wise work on activation elements and on sparse features'
// non-zeros (dropout, ReLU, copies), and the bytes their calls carry.
type tensorWork struct {
	macs, flops, elements, featureElements, bytes float64
}

func (k tensorWork) plus(o tensorWork) tensorWork {
	return tensorWork{k.macs + o.macs, k.flops + o.flops, k.elements + o.elements, k.featureElements + o.featureElements, k.bytes + o.bytes}
}

func (k tensorWork) times(f float64) tensorWork {
	return tensorWork{f * k.macs, f * k.flops, f * k.elements, f * k.featureElements, f * k.bytes}
}

// seconds returns the core-seconds of k's compute at cal's costs.
func (k tensorWork) seconds(cal Calibration) float64 { return k.compute(cal).at(cal) }

// compute returns the core-seconds of k's compute: the kernels at the micro-benchmarks' costs,
// the element-wise work at the fitted ones.
func (k tensorWork) compute(cal Calibration) linear {
	return sum(constant(k.macs*cal.FeatureSecondsPerMAC+k.flops*cal.FlopSeconds), term(elementC, k.elements), term(featureElementC, k.featureElements))
}

// count returns the task's work. AV: P = H W (a sparse product for sparse features), its
// input and P touched element-wise once more for the output's activation; the call carries H
// and W in, P out. ∇AV: dW = Hᵀ dP and, above the first layer, dH = dP Wᵀ; the call carries H,
// W and dP in, dW and dH out.
func (t Task) count() tensorWork {
	v, in, out := t.Rows, float64(t.In), float64(t.Out)
	var k tensorWork
	input, inBytes := v*in, 4*v*in
	if t.First && t.FeatureEntries > 0 {
		input, inBytes = t.FeatureEntries, 8*t.FeatureEntries // a column and a value per non-zero
		k.macs, k.featureElements = input*out, input
	} else {
		k.flops, k.elements = 2*v*in*out, input
	}
	k.elements += 2 * v * out
	k.bytes = inBytes + 4*in*out + 4*v*out
	if t.Backward {
		k.bytes += 4 * in * out
		if !t.First {
			k.flops += 2 * v * in * out
			k.bytes += 4 * v * in
		}
	}
	return k
}

// Placing is what placement weighs a graph server's tasks with: the calibration, the calls'
// latency and the server's intervals and cores.
type Placing struct {
	Cal Calibration
	// Function says the calls go to functions (Lambda, Knative), whose calibrated latency and
	// overhead per call and per byte they add; false: the cpu backend, whose injected Latency
	// alone stands for a call.
	Function bool
	// Latency is added to every call: the network to the functions, or dorylus train
	// --inject-latency.
	Latency time.Duration
	// Intervals are the server's intervals, which run each kind of task in the same stage;
	// Cores are its cores.
	Intervals int
	Cores     float64
}

// Costs returns what a kind of task costs an interval's chain of latencies (the chain bound of
// the package comment) either way: computed in the graph server, its compute for every
// interval of the server on the server's cores (the epoch gate keeps the intervals in step, so
// each waits for the cores to run the stage of all); called, one call's latency, overhead and
// compute, as the intervals' calls run at once.
func (p Placing) Costs(t Task) (local, remote float64) {
	k := t.count()
	c := k.seconds(p.Cal)
	local = c * float64(max(p.Intervals, 1)) / max(p.Cores, 1)
	remote = p.Latency.Seconds() + c
	if p.Function {
		remote += p.Cal.CallSeconds + p.Cal.CallCoreSeconds + k.bytes*p.Cal.CallByteSeconds
	}
	return local, remote
}

// Local reports whether a kind of task costs less computed in the graph server than called
// (Costs): the placement of dorylus train --placement auto.
func (p Placing) Local(t Task) bool {
	local, remote := p.Costs(t)
	return local < remote
}

// task returns the task of layer l (1-based) on one of the intervals of part p of w.
func (w Workload) task(p Part, intervals, l int, backward bool) Task {
	ws, I := w.widths(), float64(intervals)
	t := Task{Rows: float64(p.Vertices) / I, In: ws[l-1], Out: ws[l], Backward: backward, First: l == 1}
	if t.First && w.FeatureEntries > 0 {
		t.FeatureEntries = float64(w.FeatureEntries) * float64(p.Vertices) / float64(w.Vertices) / I
	}
	return t
}

// placedLocally returns the work of the tensor tasks of one epoch of w that configuration c
// runs in the heaviest graph server (Config.Placement) and how many they are: by cost on a
// function backend, or on the cpu backend when the machine adds a latency to every task (the
// stand-in for a call), with placement auto; never a GAT's.
func (w Workload) placedLocally(c Config, m Machine, cal Calibration) (tensorWork, float64) {
	if c.Placement != jobconfig.PlacementAuto || w.Model.Architecture == GAT || c.Backend == CPU && m.ExtraLatency == 0 {
		return tensorWork{}, 0
	}
	pl := Placing{Cal: cal, Function: c.Backend != CPU, Latency: m.ExtraLatency, Intervals: c.Intervals, Cores: m.coresPerServer(c.GraphServers)}
	part, n := w.Part(c.GraphServers), float64(c.Intervals*w.Model.halves())
	var k tensorWork
	var tasks float64
	for l := 1; l <= w.Model.Layers; l++ {
		for _, back := range []bool{false, true} {
			if t := w.task(part, c.Intervals, l, back); pl.Local(t) {
				k, tasks = k.plus(t.count().times(n)), tasks+n
			}
		}
	}
	return k, tasks
}
