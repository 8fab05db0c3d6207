package plan

import (
	"errors"
	"fmt"
	"time"
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
	// epochs in flight.
	Staleness int `json:"staleness"`
}

// String names the configuration on one line.
func (c Config) String() string {
	s := fmt.Sprintf("%s gs=%d intervals=%d S=%d", c.Backend, c.GraphServers, c.Intervals, c.Staleness)
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
	case c.GraphServers < 1 || c.Intervals < 1 || c.Staleness < 0:
		return fmt.Errorf("%w: %d graph servers, %d intervals, staleness %d: want at least 1 server and interval, staleness 0 or more", ErrConfig, c.GraphServers, c.Intervals, c.Staleness)
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
	Calls      float64 // tensor calls (AV, the loss, ∇AV)
	// ParamUpdates counts each weight element once per interval: fetched for AV and ∇AV,
	// its gradient pushed and applied by the parameter server.
	ParamUpdates float64
	// Elements are the dense activation elements the tensor tasks touch outside the products
	// (dropout, ReLU, softmax, copies): each layer's input, output and aggregate, forward
	// and backward; FeatureElements the sparse features' non-zeros they touch so.
	Elements        float64
	FeatureElements float64
	GhostBytes      float64 // bytes scattered to and from ghosts (SC, ∇SC)
	Messages        float64 // messages of SC and ∇SC: one to every other graph server
	PayloadBytes    float64 // bytes of the tensor calls' requests and replies
}

// Count counts the work of one epoch of w on the heaviest of parts graph servers with
// intervals intervals each. As pkg/model computes them, a layer transforms first (AV: P = H W,
// a sparse product for sparse features) and then aggregates at the output width (GA: Â P);
// backward, ∇GA aggregates dZ and ∇AV computes dW = Hᵀ dP and, above the first layer, dH.
// An interval's epoch is 6L+2 tasks (pipeline.Sequence): AV, SC, GA per layer, the loss (an
// AV), ∇GA, ∇SC, ∇AV per layer and WU; GAT's attention runs inside GA and ∇GA.
func (w Workload) Count(parts, intervals int) Epoch {
	p := w.Part(parts)
	ws := w.widths()
	L := len(ws) - 1
	v, e, g := float64(p.Vertices), float64(p.Entries), float64(p.Ghosts)
	var n Epoch
	for l := 1; l <= L; l++ {
		in, out := float64(ws[l-1]), float64(ws[l])
		input := v * in
		if l == 1 && w.FeatureEntries > 0 {
			input = float64(w.FeatureEntries) * v / float64(w.Vertices)
			n.TensorMACs += 2 * input * out // X W and Xᵀ dP
		} else {
			n.Flops += 2 * (2 * v * in * out) // H W and Hᵀ dP
		}
		if l > 1 {
			n.Flops += 2 * v * in * out // dH = dP Wᵀ
		}
		n.GraphMACs += 2 * e * out // GA and ∇GA
		if l == 1 && w.FeatureEntries > 0 {
			n.FeatureElements += 2 * input
		} else {
			n.Elements += 2 * input
		}
		n.Elements += 2 * 2 * v * out
		if w.Model.Architecture == GAT {
			n.GraphMACs += 2 * 4 * e * float64(w.headsOf(l)) // AE and ∇AE: a score and its softmax per entry and head
		}
		n.ParamUpdates += float64(intervals) * in * out
		n.GhostBytes += 2 * 4 * g * out           // SC and ∇SC
		n.PayloadBytes += 4 * (3*input + 2*v*out) // AV: H in, P out; ∇AV: H and dP in, dH out
	}
	I, fL := float64(intervals), float64(L)
	n.Tasks = I * (6*fL + 2)
	n.Calls = I * (2*fL + 1)
	n.Messages = I * 2 * fL * float64(parts-1)
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
	ChainSeconds float64 `json:"chainSeconds"` // one interval's tasks in order
	// Calls are the tensor calls of one epoch over all graph servers, each of CallSeconds.
	Calls       float64 `json:"calls"`
	CallSeconds float64 `json:"callSeconds"`
}

// Predict predicts one epoch of w in configuration c on machine m (see the package comment).
func Predict(w Workload, c Config, m Machine, cal Calibration) (Prediction, error) {
	if err := w.Validate(); err != nil {
		return Prediction{}, err
	}
	if err := c.validate(m); err != nil {
		return Prediction{}, err
	}
	n := w.Count(c.GraphServers, c.Intervals)
	P, I := float64(c.GraphServers), float64(c.Intervals)
	graphK, tensorK := n.kernelSeconds(cal)
	graphCS := graphK + n.Tasks*cal.TaskSeconds + n.Messages*cal.MessageSeconds                       // the graph tasks, the scheduling of all, the scatters
	tensorCS := tensorK + n.Elements*cal.ElementSeconds + n.FeatureElements*cal.FeatureElementSeconds // the tensor tasks' products and element-wise work
	paramCS := n.ParamUpdates * cal.ParamSeconds                                                      // weights fetched, gradients pushed and applied
	cores := m.coresPerServer(c.GraphServers)
	network := n.GhostBytes / cal.BytesPerSecond
	var p Prediction
	p.Calls = n.Calls * P
	if c.Backend == CPU {
		p.WorkSeconds = (graphCS+tensorCS+paramCS)/cores + network
		p.CallSeconds = m.ExtraLatency.Seconds() + tensorCS/n.Calls/cores
	} else {
		fnCores := 1.0 // an emulator's process, or the one vCPU a Knative call is priced as
		if c.Backend == Lambda && m.SharedCores == 0 {
			fnCores = min(float64(c.MemoryMB)/lambdaMBPerVCPU, lambdaMaxVCPUs)
		}
		p.CallSeconds = cal.CallSeconds + m.ExtraLatency.Seconds() + n.PayloadBytes/n.Calls/cal.BytesPerSecond + tensorCS/n.Calls/fnCores
		p.CallsSeconds = n.Calls * p.CallSeconds / float64(c.Concurrency)
		p.WorkSeconds = (graphCS+paramCS)/cores + network
		if m.SharedCores > 0 { // the functions and their emulators run on the same cores
			p.WorkSeconds += (tensorCS + n.Calls*cal.CallSeconds) / cores
		}
	}
	if m.SharedCores == 0 { // every graph server's updates reach the parameter servers
		p.ParamSeconds = P * paramCS / float64(m.ParamServerCores)
	}
	p.ChainSeconds = (n.Calls/I*p.CallSeconds + graphCS/I/cores) / float64(c.Staleness+1)
	p.EpochSeconds = max(p.WorkSeconds, p.ParamSeconds, p.CallsSeconds, p.ChainSeconds) + cal.EpochSeconds
	return p, nil
}
