package graphserver

import (
	"context"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// taskSpan returns the span of st's task, of kind k, on its interval's lane, without times.
func taskSpan(st pipeline.Started, k trace.Kind) trace.Span {
	t := st.Task
	return trace.Span{Kind: k, Lane: trace.Lane(t.Interval, t.Kind >= pipeline.KindBackGA), Epoch: int32(t.Epoch),
		Layer: int32(t.Layer), Interval: int32(t.Interval), Version: int32(st.Weights)}
}

// weightsFor returns the weights st pinned; a task that has to wait for their pull records
// the wait.
func (e *taskEnv) weightsFor(ctx context.Context, st pipeline.Started) ([]*tensor.Dense, error) {
	if e.rec == nil || e.weights.has(st.Weights) {
		return e.weights.at(ctx, st.Weights)
	}
	sp := taskSpan(st, trace.WaitWeights)
	sp.Start = e.rec.Now()
	w, err := e.weights.at(ctx, st.Weights)
	sp.End = e.rec.Now()
	e.rec.Add(sp)
	return w, err
}

// call runs st's tensor request on the backend; on a backend of remote functions the call is
// recorded as a wait on them, unless the placement runs it here (the task's own compute).
func (e *taskEnv) call(ctx context.Context, st pipeline.Started, req dispatch.TaskRequest) error {
	if e.rec == nil || !e.remote || e.place.RunsLocally(&req) {
		_, err := e.backend.Run(ctx, req)
		return err
	}
	sp := taskSpan(st, trace.WaitFunction)
	sp.Start = e.rec.Now()
	_, err := e.backend.Run(ctx, req)
	sp.End = e.rec.Now()
	e.rec.Add(sp)
	return err
}

// waitKinds maps the scheduler's reasons to the trace's.
var waitKinds = [...]trace.Kind{pipeline.WaitGate: trace.WaitGate, pipeline.WaitVersion: trace.WaitVersion, pipeline.WaitRows: trace.WaitRows}

// idleTracker records, for the loop, each local interval's waits between its tasks: from the
// end of its last task to the start of its next, named by the last reason the scheduler gave
// while nothing of it ran or was ready (trace.WaitLoop if none). A nil tracker records
// nothing.
type idleTracker struct {
	rec     *trace.Recorder
	part    int
	running []int        // tasks of the interval running
	since   []int64      // when the interval went idle
	why     []trace.Kind // what it waits for
}

func newIdleTracker(rec *trace.Recorder, part, intervals int) *idleTracker {
	if rec == nil {
		return nil
	}
	w := &idleTracker{rec: rec, part: part, running: make([]int, intervals), since: make([]int64, intervals), why: make([]trace.Kind, intervals)}
	now := rec.Now()
	for i := range w.since {
		w.since[i], w.why[i] = now, trace.WaitLoop
	}
	return w
}

// started records the wait that ends as t starts.
func (w *idleTracker) started(st pipeline.Started) {
	if w == nil {
		return
	}
	i := st.Task.Interval
	if w.running[i]++; w.running[i] == 1 {
		sp := taskSpan(st, w.why[i])
		sp.Start, sp.End, sp.Version = w.since[i], w.rec.Now(), -1
		w.rec.Add(sp)
	}
}

// done records that t ended at end (the recorder's clock).
func (w *idleTracker) done(t pipeline.Task, end int64) {
	if w == nil {
		return
	}
	i := t.Interval
	if w.running[i]--; w.running[i] == 0 {
		w.since[i], w.why[i] = end, trace.WaitLoop
	}
}

// observe notes why each idle interval waits.
func (w *idleTracker) observe(s *pipeline.Scheduler) {
	if w == nil {
		return
	}
	for i, n := range w.running {
		if n > 0 {
			continue
		}
		if b := s.Blocked(w.part, i); b != pipeline.WaitNone {
			w.why[i] = waitKinds[b]
		}
	}
}
