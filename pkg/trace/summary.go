package trace

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// EpochSummary is where one server's time went during one epoch: from the start of the first
// wait or task of the epoch (a wait is of the epoch of the task it precedes) to the end of its
// last task (Wall), when some task ran (Busy), when none did
// but an interval waited (Wait, by reason in Waits), and when no span was open at all
// (Untraced: a server's loop between tasks, or its goroutines waiting for a core); Graph and Tensor are the times some
// graph or tensor task ran (a tensor task not blocked), Overlap when both did. A task blocked on a weight fetch or a
// function counts as waiting. Epoch counts from 1, as the train report does; times are in
// seconds.
type EpochSummary struct {
	Server   int32              `json:"server"`
	Epoch    int32              `json:"epoch"`
	Wall     float64            `json:"wall_seconds"`
	Busy     float64            `json:"busy_seconds"`
	Wait     float64            `json:"wait_seconds"`
	Waits    map[string]float64 `json:"waits,omitempty"`
	Untraced float64            `json:"untraced_seconds"`
	Graph    float64            `json:"graph_seconds"`
	Tensor   float64            `json:"tensor_seconds"`
	Overlap  float64            `json:"overlap_seconds"`
}

// waitOrder is the order in which a moment with several waits is attributed: the most
// specific first.
var waitOrder = [...]Kind{WaitFunction, WaitWeights, WaitRows, WaitVersion, WaitGate, WaitLoop}

// Summarize sums every epoch of every server of f, ordered by epoch, then server.
func Summarize(f File) []EpochSummary {
	type key struct{ server, epoch int32 }
	windows := map[key][2]int64{}
	for _, s := range f.Spans {
		if s.Kind == Eval {
			continue
		}
		k := key{s.Server, s.Epoch}
		w, ok := windows[k]
		if !ok {
			w = [2]int64{s.Start, 0}
		}
		w[0] = min(w[0], s.Start)
		if !s.Kind.IsWait() {
			w[1] = max(w[1], s.End)
		}
		windows[k] = w
	}
	keys := make([]key, 0, len(windows))
	for k, w := range windows {
		if w[1] > w[0] { // a window of waits only has no task to end it
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.epoch != b.epoch {
			return int(a.epoch - b.epoch)
		}
		return int(a.server - b.server)
	})
	out := make([]EpochSummary, 0, len(keys))
	for _, k := range keys {
		w := windows[k]
		out = append(out, sweep(f.Spans, k.server, k.epoch, w[0], w[1]))
	}
	return out
}

// sweep sums server's spans over the window [lo, hi).
func sweep(spans []Span, server, epoch int32, lo, hi int64) EpochSummary {
	type edge struct {
		at    int64
		kind  Kind
		delta int
	}
	var edges []edge
	for _, s := range spans {
		if s.Server != server || s.Kind == Eval || s.End <= lo || s.Start >= hi {
			continue
		}
		edges = append(edges, edge{max(s.Start, lo), s.Kind, 1}, edge{min(s.End, hi), s.Kind, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return b.delta - a.delta // starts before ends at the same moment
	})
	var active [numKinds]int
	var waits [numKinds]int64
	sum := EpochSummary{Server: server, Epoch: epoch + 1, Wall: seconds(hi - lo)}
	var busy, graph, tensor, overlap, untraced int64
	if len(edges) > 0 {
		untraced = edges[0].at - lo
	}
	for i, e := range edges {
		active[e.kind] += e.delta
		if i+1 == len(edges) {
			break
		}
		d := edges[i+1].at - e.at
		if d == 0 {
			continue
		}
		var tasks, blocked, g, t int
		for k := range Eval {
			tasks += active[k]
			if k.IsGraph() {
				g += active[k]
			} else if k.IsTensor() {
				t += active[k]
			}
		}
		blocked = active[WaitWeights] + active[WaitFunction]
		if g > 0 {
			graph += d
		}
		t -= blocked // a task blocked on a pull or a function does no tensor work here
		if t > 0 {
			tensor += d
		}
		if g > 0 && t > 0 {
			overlap += d
		}
		if tasks > blocked {
			busy += d
			continue
		}
		open := false
		for _, k := range waitOrder {
			if active[k] > 0 {
				waits[k] += d
				open = true
				break
			}
		}
		if !open {
			untraced += d
		}
	}
	sum.Busy, sum.Graph, sum.Tensor, sum.Overlap = seconds(busy), seconds(graph), seconds(tensor), seconds(overlap)
	sum.Untraced = seconds(untraced)
	for _, k := range waitOrder {
		if waits[k] > 0 {
			if sum.Waits == nil {
				sum.Waits = map[string]float64{}
			}
			sum.Waits[strings.TrimPrefix(k.String(), "wait ")] = seconds(waits[k])
			sum.Wait += seconds(waits[k])
		}
	}
	return sum
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// WriteSummary writes one line per summary.
func WriteSummary(w io.Writer, sums []EpochSummary) {
	for _, s := range sums {
		var waits []string
		for _, k := range waitOrder {
			name := strings.TrimPrefix(k.String(), "wait ")
			if v, ok := s.Waits[name]; ok {
				waits = append(waits, fmt.Sprintf("%s %.1f", name, 1e3*v))
			}
		}
		fmt.Fprintf(w, "trace: epoch %d server %d: wall %.1f ms, busy %.1f (graph %.1f, tensor %.1f, both %.1f), waiting %.1f [%s], untraced %.1f\n",
			s.Epoch, s.Server, 1e3*s.Wall, 1e3*s.Busy, 1e3*s.Graph, 1e3*s.Tensor, 1e3*s.Overlap, 1e3*s.Wait, strings.Join(waits, ", "), 1e3*s.Untraced)
	}
}
