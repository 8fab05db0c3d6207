package plan

import "time"

// Task is the shape of one GCN tensor task (AV or ∇AV of one layer, or one half of a
// GraphSAGE's) on one interval, as placement weighs it (Placing.Local).
type Task struct {
	Rows    int // rows of the interval
	In, Out int // the layer's input width and the width of its P
	// FeatureEntries are the non-zeros of the rows' features when they are sparse (a first
	// layer's input; 0: dense).
	FeatureEntries int64
	Backward       bool // ∇AV: dW = Hᵀ dP and, above the first layer, dH = dP Wᵀ
	First          bool // layer 0: the input is the features, and ∇AV computes no dH
}

// work returns the task's kernel core-seconds and element counts at cal's costs, and the bytes
// a call of it carries, as Count counts one interval's share of them (the package comment).
func (t Task) work(cal Calibration) (seconds, bytes float64) {
	v, in, out := float64(t.Rows), float64(t.In), float64(t.Out)
	input, inBytes := v*in, 4*v*in
	if t.First && t.FeatureEntries > 0 {
		input, inBytes = float64(t.FeatureEntries), 8*float64(t.FeatureEntries)
		seconds = input*out*cal.FeatureSecondsPerMAC + input*cal.FeatureElementSeconds
	} else {
		seconds = 2*v*in*out*cal.FlopSeconds + input*cal.ElementSeconds
	}
	seconds += 2 * v * out * cal.ElementSeconds
	bytes = inBytes + 4*in*out + 4*v*out // the input and W in; P out, or dP in
	if t.Backward {
		bytes += 4 * in * out // dW out
		if !t.First {
			seconds += 2 * v * in * out * cal.FlopSeconds
			bytes += 4 * v * in
		}
	}
	return seconds, bytes
}

// Placing is what placement weighs a graph server's tasks with: the calibration, the calls'
// latency and the server's intervals and cores.
type Placing struct {
	Cal Calibration
	// Function says the calls go to functions (Lambda, Knative), whose calibrated overhead per
	// call and per byte they add; false: the cpu backend, whose injected Latency alone stands
	// for a call.
	Function bool
	// Latency is added to every call: the network to the functions, or dorylus train
	// --inject-latency.
	Latency time.Duration
	// Intervals are the server's intervals, which run each kind of task in the same stage;
	// Cores are its cores.
	Intervals, Cores int
}

// Costs returns what a kind of task costs an interval's chain of latencies (the chain bound of
// the package comment) either way: computed in the graph server, its compute for every
// interval of the server on the server's cores (the epoch gate keeps the intervals in step, so
// each waits for the cores to run the stage of all); called, one call's latency, overhead and
// compute, as the intervals' calls run at once.
func (p Placing) Costs(t Task) (local, remote float64) {
	c, bytes := t.work(p.Cal)
	local = c * float64(max(p.Intervals, 1)) / float64(max(p.Cores, 1))
	remote = p.Latency.Seconds() + c
	if p.Function {
		remote += p.Cal.CallSeconds + p.Cal.CallCoreSeconds + bytes*p.Cal.CallByteSeconds
	}
	return local, remote
}

// Local reports whether a kind of task costs less computed in the graph server than called
// (Costs): the placement of dorylus train --placement auto.
func (p Placing) Local(t Task) bool {
	local, remote := p.Costs(t)
	return local < remote
}
