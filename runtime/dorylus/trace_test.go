package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/stats"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// readTrace checks that path is JSON with a traceEvents array and reads it.
func readTrace(t *testing.T, path string) trace.File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.TraceEvents) == 0 {
		t.Fatalf("%s: not a Chrome trace (%v), %d events", path, err, len(doc.TraceEvents))
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// checkTasks asserts that every task of Sequence(layers) appears once for every epoch,
// interval and server (but SC and ∇SC when scatter is false: a single process has none).
func checkTasks(t *testing.T, f trace.File, servers, intervals, epochs, layers int, scatter bool) {
	t.Helper()
	type key struct {
		server, epoch, interval, layer int32
		kind                           trace.Kind
	}
	got := map[key]int{}
	for _, s := range f.Spans {
		if !s.Kind.IsWait() && s.Kind != trace.Eval {
			got[key{s.Server, s.Epoch, s.Interval, s.Layer, s.Kind}]++
		}
	}
	want := 0
	for q := range servers {
		for e := range epochs {
			for i := range intervals {
				for _, st := range pipeline.Sequence(layers) {
					if !scatter && (st.Kind == pipeline.KindSC || st.Kind == pipeline.KindBackSC) {
						continue
					}
					want++
					if n := got[key{int32(q), int32(e), int32(i), int32(st.Layer), trace.Kind(st.Kind)}]; n != 1 {
						t.Errorf("server %d epoch %d interval %d %v: %d spans, want 1", q, e, i, st, n)
					}
				}
			}
		}
	}
	if len(got) != want {
		t.Errorf("%d distinct tasks, want %d", len(got), want)
	}
}

// checkLanes asserts that the spans of a lane do not overlap, except the waits inside a task
// (weight pulls, function calls), which lie within it, as the viewers need.
func checkLanes(t *testing.T, f trace.File) {
	t.Helper()
	lanes := map[[2]int32][]trace.Span{}
	for _, s := range f.Spans {
		lanes[[2]int32{s.Server, s.Lane}] = append(lanes[[2]int32{s.Server, s.Lane}], s)
	}
	for l, spans := range lanes {
		slices.SortStableFunc(spans, func(a, b trace.Span) int {
			if a.Start != b.Start {
				return int(a.Start - b.Start)
			}
			return int(b.End - a.End) // the enclosing span first
		})
		var top trace.Span
		for i, s := range spans {
			switch {
			case i == 0 || s.Start >= top.End:
				top = s
			case (s.Kind == trace.WaitWeights || s.Kind == trace.WaitFunction) && s.End <= top.End && !top.Kind.IsWait():
			default:
				t.Errorf("server %d lane %d: %v [%d, %d] overlaps %v [%d, %d]", l[0], l[1], s.Kind, s.Start, s.End, top.Kind, top.Start, top.End)
			}
		}
	}
}

// A trace of two graph servers on Cora with S = 0: every task of every epoch, layer and
// interval, lanes without overlaps, gate waits, and epochs the spans cover.
func TestTraceTwoGraphServers(t *testing.T) {
	const epochs, intervals = 4, 3
	path := filepath.Join(t.TempDir(), "trace.json")
	rep := runCLI(t, "train", "--graph-servers", "2", "--staleness", "0", "--intervals", fmt.Sprint(intervals),
		"--epochs", fmt.Sprint(epochs), "--eval-every", "100", "--trace", path, "--output", "json")
	f := readTrace(t, path)
	checkTasks(t, f, 2, intervals, epochs, 2, true)
	checkLanes(t, f)
	gates := map[[2]int32]int{}
	for _, s := range f.Spans {
		if s.Kind == trace.WaitGate {
			gates[[2]int32{s.Server, s.Epoch}]++
		}
	}
	for q := range int32(2) {
		for e := int32(1); e < epochs; e++ {
			if gates[[2]int32{q, e}] == 0 {
				t.Errorf("server %d epoch %d: no interval waited at the epoch gate (S = 0)", q, e)
			}
		}
	}
	if len(rep.Trace) != 2*epochs {
		t.Fatalf("%d epoch summaries in the report, want %d", len(rep.Trace), 2*epochs)
	}
	t.Logf("median epoch %.4f s; summaries %+v", rep.EpochSecondsMedian, rep.Trace)
	checkCoverage(t, rep.Trace)
	for _, s := range rep.Trace {
		if s.Overlap > min(s.Graph, s.Tensor) || s.Busy > s.Wall {
			t.Errorf("epoch %d server %d: %+v", s.Epoch, s.Server, s)
		}
	}
}

// checkCoverage checks that every epoch's time is busy, waiting or untraced, and that the
// spans cover nearly all of it: untraced time (a server's loop between tasks, or its
// goroutines waiting for a core on a loaded machine) is at most 5 % of all epochs' time.
func checkCoverage(t *testing.T, sums []trace.EpochSummary) {
	t.Helper()
	var wall, untraced float64
	for _, s := range sums {
		if s.Wall <= 0 || math.Abs(s.Busy+s.Wait+s.Untraced-s.Wall) > 1e-6 {
			t.Errorf("epoch %d server %d: busy %.6f + waiting %.6f + untraced %.6f s, wall %.6f s", s.Epoch, s.Server, s.Busy, s.Wait, s.Untraced, s.Wall)
		}
		wall += s.Wall
		untraced += s.Untraced
	}
	if untraced > 0.05*wall {
		t.Errorf("%.4f s of %.4f s untraced: the spans miss more than 5 %% of the epochs", untraced, wall)
	}
}

// A single-process trace: every task of every epoch, all busy, within the measured epoch.
func TestTraceSingleProcess(t *testing.T) {
	const epochs = 3
	path := filepath.Join(t.TempDir(), "trace.json")
	rep := runCLI(t, "train", "--epochs", fmt.Sprint(epochs), "--trace", path, "--output", "json")
	f := readTrace(t, path)
	checkTasks(t, f, 1, 1, epochs, 2, false)
	checkLanes(t, f)
	if len(rep.Trace) != epochs {
		t.Fatalf("%d epoch summaries, want %d", len(rep.Trace), epochs)
	}
	checkCoverage(t, rep.Trace)
	var walls []float64
	for _, s := range rep.Trace {
		if s.Wait != 0 {
			t.Errorf("epoch %d: busy %.6f, waiting %.6f, wall %.6f: the single process never waits", s.Epoch, s.Busy, s.Wait, s.Wall)
		}
		walls = append(walls, s.Wall)
	}
	// The spans lie inside the measured epochs and cover all but a few checks of them.
	if m := stats.Median(walls); m > rep.EpochSecondsMedian || m < 0.8*rep.EpochSecondsMedian {
		t.Errorf("median traced epoch %.6f s, measured %.6f s", m, rep.EpochSecondsMedian)
	}
}
