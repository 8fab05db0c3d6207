package trace

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
)

func TestKindsMirrorPipeline(t *testing.T) {
	for k := pipeline.KindAV; k <= pipeline.KindWU; k++ {
		if got := Kind(k).String(); got != k.String() {
			t.Errorf("Kind(%v) = %q", k, got)
		}
		if Kind(k).IsTensor() != k.IsTensor() {
			t.Errorf("Kind(%v).IsTensor() = %v", k, Kind(k).IsTensor())
		}
	}
}

func TestNilRecorderAndAddAllocateNothing(t *testing.T) {
	var off *Recorder
	if n := testing.AllocsPerRun(100, func() { off.Add(Span{Start: off.Now(), End: off.Now()}) }); n != 0 {
		t.Fatalf("nil recorder: %v allocations per span", n)
	}
	on := New(0, 1000)
	if n := testing.AllocsPerRun(100, func() { on.Add(Span{Start: on.Now(), End: on.Now()}) }); n != 0 {
		t.Fatalf("recorder with room: %v allocations per span", n)
	}
}

func TestWriteReadMerge(t *testing.T) {
	origin := time.Unix(1000, 0)
	a := File{Origin: origin, Spans: []Span{
		{Start: 1000, End: 5500, Kind: GA, Lane: Lane(0, false), Epoch: 2, Layer: 1, Interval: 0, Version: -1},
		{Start: 5500, End: 6000, Kind: WaitRows, Lane: Lane(0, false), Epoch: 2, Version: -1},
	}}
	b := File{Origin: origin.Add(-time.Microsecond), Spans: []Span{
		{Start: 0, End: 2000, Kind: SC, Server: 1, Lane: Lane(3, true), Epoch: 0, Layer: 0, Interval: 3, Version: -1, Bytes: 4096},
	}}
	var buf bytes.Buffer
	if err := Write(&buf, a); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if _, ok := raw["traceEvents"].([]any); !ok {
		t.Fatalf("no traceEvents array: %s", buf.String())
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Origin.Equal(origin) || len(got.Spans) != 2 || got.Spans[0] != a.Spans[0] || got.Spans[1] != a.Spans[1] {
		t.Fatalf("read back %+v, want %+v", got, a)
	}
	m := Merge(a, b)
	if !m.Origin.Equal(b.Origin) {
		t.Fatalf("merged origin %v, want the earliest %v", m.Origin, b.Origin)
	}
	if m.Spans[0].Start != 2000 || m.Spans[2].Start != 0 {
		t.Fatalf("merged starts %d and %d, want 2000 (shifted by 1 µs) and 0", m.Spans[0].Start, m.Spans[2].Start)
	}
	if _, err := Read(bytes.NewBufferString(`{"traceEvents":[{"ph":"X","name":"x","args":{"kind":"nope","epoch":0}}]}`)); err == nil {
		t.Fatal("an unknown kind was read")
	}
}

func TestSummarize(t *testing.T) {
	ms := int64(time.Millisecond)
	// Server 0, epoch 0: GA 0–4 ms, AV 2–6 ms with a weight fetch 2–3 ms, a rows wait 6–8 ms,
	// nothing 8–9 ms, WU 9–11 ms.
	f := File{Spans: []Span{
		{Start: 0, End: 4 * ms, Kind: GA, Lane: 1},
		{Start: 2 * ms, End: 6 * ms, Kind: AV, Lane: 3},
		{Start: 2 * ms, End: 3 * ms, Kind: WaitWeights, Lane: 3},
		{Start: 6 * ms, End: 8 * ms, Kind: WaitRows, Lane: 1},
		{Start: 9 * ms, End: 11 * ms, Kind: WU, Lane: 2},
		{Start: 5 * ms, End: 50 * ms, Kind: Eval, Lane: EvalLane},
	}}
	sums := Summarize(f)
	if len(sums) != 1 {
		t.Fatalf("%d summaries, want 1", len(sums))
	}
	s := sums[0]
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("wall", s.Wall, 0.011)
	near("busy", s.Busy, 0.008)
	near("wait", s.Wait, 0.002)
	near("untraced", s.Untraced, 0.001)
	near("rows", s.Waits["rows"], 0.002)
	near("graph", s.Graph, 0.006)
	near("tensor", s.Tensor, 0.003) // not while blocked on the weights
	near("overlap", s.Overlap, 0.001)
	if _, ok := s.Waits["weights"]; ok {
		t.Errorf("the weight fetch counted as waiting while GA ran: %v", s.Waits)
	}
}

// A wait before an epoch's first task (the staleness gate) belongs to that epoch's window.
func TestSummarizeCountsLeadingWaits(t *testing.T) {
	ms := int64(time.Millisecond)
	f := File{Spans: []Span{
		{Start: 0, End: 2 * ms, Kind: WU, Lane: 2},
		{Start: 2 * ms, End: 5 * ms, Kind: WaitGate, Lane: 1, Epoch: 1},
		{Start: 5 * ms, End: 6 * ms, Kind: AV, Lane: 1, Epoch: 1},
	}}
	sums := Summarize(f)
	if len(sums) != 2 || sums[1].Epoch != 2 {
		t.Fatalf("summaries %+v, want epochs 1 and 2", sums)
	}
	if s := sums[1]; math.Abs(s.Wall-0.004) > 1e-9 || math.Abs(s.Waits["gate"]-0.003) > 1e-9 || math.Abs(s.Busy-0.001) > 1e-9 {
		t.Fatalf("epoch 2: %+v, want wall 4 ms, gate 3 ms, busy 1 ms", s)
	}
}

// BenchmarkRecorder times a span's Now, Now and Add from every core at once: off (a nil
// recorder) and on (with room for every span).
func BenchmarkRecorder(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			var rec *Recorder
			if on {
				rec = New(0, b.N)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					start := rec.Now()
					rec.Add(Span{Start: start, End: rec.Now(), Kind: GA})
				}
			})
		})
	}
}
