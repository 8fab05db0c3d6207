package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// EvalLane is the lane of evaluation passes; Lane numbers the lanes of intervals.
const EvalLane = 0

// Lane returns the lane of an interval's forward pass (AV_0 … AV_L) or backward pass (∇GA …
// WU): each runs one task at a time.
func Lane(interval int, backward bool) int32 {
	l := 2*int32(interval) + 1
	if backward {
		l++
	}
	return l
}

// laneName names a lane in the viewer.
func laneName(l int32) string {
	if l == EvalLane {
		return "evaluation"
	}
	if l%2 == 1 {
		return fmt.Sprintf("interval %d forward", (l-1)/2)
	}
	return fmt.Sprintf("interval %d backward", (l-2)/2)
}

// File is a timeline: the spans of one or more servers, their times in nanoseconds since
// Origin.
type File struct {
	Origin time.Time
	Spans  []Span
}

// FromRecorder returns the spans recorded so far as a file.
func FromRecorder(r *Recorder) File { return File{Origin: r.Origin(), Spans: r.Spans()} }

// event is one Chrome trace event.
type event struct {
	Name string     `json:"name"`
	Cat  string     `json:"cat,omitempty"`
	Ph   string     `json:"ph"`
	Ts   float64    `json:"ts"`
	Dur  float64    `json:"dur,omitempty"`
	Pid  int32      `json:"pid"`
	Tid  int32      `json:"tid"`
	Args *eventArgs `json:"args,omitempty"`
}

// eventArgs are a span's fields, or a metadata event's name.
type eventArgs struct {
	Name     string `json:"name,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Epoch    *int32 `json:"epoch,omitempty"`
	Layer    int32  `json:"layer"`
	Interval int32  `json:"interval"`
	Version  int32  `json:"version"`
	Bytes    int64  `json:"bytes,omitempty"`
}

// document is the JSON object Write writes.
type document struct {
	TraceEvents     []event           `json:"traceEvents"`
	DisplayTimeUnit string            `json:"displayTimeUnit"`
	OtherData       map[string]string `json:"otherData"`
}

// originKey holds the origin, in Unix nanoseconds, in otherData.
const originKey = "origin_unix_ns"

// Write writes f as Chrome trace-event JSON: a process per server, a thread per lane, an "X"
// event per span with its fields in args.
func Write(w io.Writer, f File) error {
	doc := document{DisplayTimeUnit: "ms", OtherData: map[string]string{originKey: strconv.FormatInt(f.Origin.UnixNano(), 10)},
		TraceEvents: make([]event, 0, len(f.Spans)+16)}
	type lane struct{ pid, tid int32 }
	seen := map[lane]bool{}
	servers := map[int32]bool{}
	for _, s := range f.Spans {
		if !servers[s.Server] {
			servers[s.Server] = true
			doc.TraceEvents = append(doc.TraceEvents, event{Name: "process_name", Ph: "M", Pid: s.Server,
				Args: &eventArgs{Name: fmt.Sprintf("server %d", s.Server)}})
		}
		if l := (lane{s.Server, s.Lane}); !seen[l] {
			seen[l] = true
			doc.TraceEvents = append(doc.TraceEvents, event{Name: "thread_name", Ph: "M", Pid: s.Server, Tid: s.Lane,
				Args: &eventArgs{Name: laneName(s.Lane)}})
		}
		cat, name := "task", s.Kind.String()
		if s.Kind.IsWait() {
			cat = "wait"
		} else if s.Kind != WU && s.Kind != Eval {
			name += "_" + strconv.Itoa(int(s.Layer))
		}
		e := s.Epoch
		doc.TraceEvents = append(doc.TraceEvents, event{Name: name, Cat: cat, Ph: "X", Ts: float64(s.Start) / 1e3,
			Dur: float64(s.End-s.Start) / 1e3, Pid: s.Server, Tid: s.Lane,
			Args: &eventArgs{Kind: s.Kind.String(), Epoch: &e, Layer: s.Layer, Interval: s.Interval, Version: s.Version, Bytes: s.Bytes}})
	}
	enc := json.NewEncoder(w)
	return enc.Encode(doc)
}

// Read reads a file Write wrote.
func Read(r io.Reader) (File, error) {
	var doc document
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return File{}, fmt.Errorf("trace: %w", err)
	}
	var f File
	if o, ok := doc.OtherData[originKey]; ok {
		ns, err := strconv.ParseInt(o, 10, 64)
		if err != nil {
			return File{}, fmt.Errorf("trace: otherData.%s %q: %w", originKey, o, err)
		}
		f.Origin = time.Unix(0, ns)
	}
	for i, e := range doc.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		if e.Args == nil || e.Args.Epoch == nil {
			return File{}, fmt.Errorf("trace: event %d (%s) has no epoch in its args", i, e.Name)
		}
		k := Kind(slices.Index(kindNames[:], e.Args.Kind))
		if k >= numKinds {
			return File{}, fmt.Errorf("trace: event %d (%s) has unknown kind %q", i, e.Name, e.Args.Kind)
		}
		start := int64(math.Round(e.Ts * 1e3))
		f.Spans = append(f.Spans, Span{Start: start, End: start + int64(math.Round(e.Dur*1e3)), Kind: k,
			Server: e.Pid, Lane: e.Tid, Epoch: *e.Args.Epoch, Layer: e.Args.Layer, Interval: e.Args.Interval,
			Version: e.Args.Version, Bytes: e.Args.Bytes})
	}
	return f, nil
}

// Merge returns the spans of every file on one clock: the earliest origin's. The servers of
// one run on one machine share its wall clock; on several machines, the error of Merge is
// that of their clock synchronisation.
func Merge(files ...File) File {
	var out File
	for i, f := range files {
		if i == 0 || f.Origin.Before(out.Origin) {
			out.Origin = f.Origin
		}
	}
	for _, f := range files {
		shift := f.Origin.Sub(out.Origin).Nanoseconds()
		for _, s := range f.Spans {
			s.Start += shift
			s.End += shift
			out.Spans = append(out.Spans, s)
		}
	}
	return out
}
