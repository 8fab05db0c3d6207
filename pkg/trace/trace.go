package trace

import (
	"sync"
	"time"
)

// Kind is what a span was: a task (in pkg/pipeline's order: AV … WU, so that
// Kind(pipeline.Kind) converts), an evaluation pass, or a wait.
type Kind uint8

// The kinds of span.
const (
	AV     Kind = iota // ApplyVertex AV_l; AV_L is the loss
	SC                 // Scatter SC_l
	GA                 // Gather GA_l
	BackGA             // ∇GA_l
	BackSC             // ∇SC_l
	BackAV             // ∇AV_l
	WU                 // weight update
	Eval               // an evaluation or export pass
	// Waits: an interval with no task running, or a task blocked inside.
	WaitGate     // the staleness gate (epoch gate)
	WaitVersion  // synchronous mode: the previous epoch's weights not updated yet
	WaitRows     // rows of other intervals, local or peers', not produced yet
	WaitWeights  // a weight fetch from the parameter servers, inside a task
	WaitFunction // a tensor task on a remote function, inside a task
	WaitLoop     // ready, waiting for the server's loop to start it
	numKinds
)

var kindNames = [numKinds]string{"AV", "SC", "GA", "∇GA", "∇SC", "∇AV", "WU", "eval",
	"wait gate", "wait version", "wait rows", "wait weights", "wait function", "wait loop"}

// String returns the kind's name.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// IsWait reports whether the kind is a wait.
func (k Kind) IsWait() bool { return k >= WaitGate && k < numKinds }

// IsTensor reports whether the kind is a tensor task (AV, ∇AV).
func (k Kind) IsTensor() bool { return k == AV || k == BackAV }

// IsGraph reports whether the kind is a graph-server task (SC, GA, ∇GA, ∇SC, WU).
func (k Kind) IsGraph() bool { return k <= WU && !k.IsTensor() }

// Span is one recorded task or wait. Times are nanoseconds since the recorder's origin.
type Span struct {
	Start, End int64
	Kind       Kind
	Server     int32 // pid: the graph server (0 in a single process)
	Lane       int32 // tid
	Epoch      int32
	Layer      int32
	Interval   int32
	Version    int32 // weight version, -1 if none
	Bytes      int64 // bytes sent or pulled, 0 if none
}

// Recorder collects the spans of one server. A nil Recorder records nothing.
type Recorder struct {
	server int32
	origin time.Time // wall clock and monotonic reading at New

	mu    sync.Mutex
	spans []Span
}

// New returns a recorder for server with room for capacity spans before its buffer grows.
func New(server, capacity int) *Recorder {
	return &Recorder{server: int32(server), origin: time.Now(), spans: make([]Span, 0, capacity)}
}

// Now returns the nanoseconds since the recorder's origin (0 for a nil recorder).
func (r *Recorder) Now() int64 {
	if r == nil {
		return 0
	}
	return int64(time.Since(r.origin))
}

// Add records s, with the recorder's server; a span that ends before it starts is dropped.
func (r *Recorder) Add(s Span) {
	if r == nil || s.End < s.Start {
		return
	}
	s.Server = r.server
	r.mu.Lock()
	r.spans = append(r.spans, s)
	r.mu.Unlock()
}

// Spans returns a copy of the spans recorded so far.
func (r *Recorder) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Origin returns the wall-clock time of the recorder's origin.
func (r *Recorder) Origin() time.Time { return r.origin }
