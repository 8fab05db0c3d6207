package graphserver

import (
	"errors"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// ErrPreempted is the error Run returns when the run was preempted (Config.Preempt, a peer's
// notice, a parameter server's): the servers stopped at an epoch boundary the parameter
// servers checkpoint, and the run is to be resumed from it, not reported as finished.
var ErrPreempted = errors.New("preempted: resume from the newest checkpoint")

// errStopped ends a run preempted once it had trained its last epoch: there is nothing to
// drain or resume, and Run returns nil, as for a stop.
var errStopped = errors.New("stopped after the last epoch")

// drainMargin is how many epochs beyond the bound of the epoch gate a preemption's drain
// runs (drainEnd): the time graph server 0's Stop takes to reach the others.
const drainMargin = 2

// A preemption, on any graph server, goes like this. The server that gets SIGTERM (or the
// Watch stream of a parameter server that got it) tells graph server 0, which chooses the
// drain's last epoch D beyond any epoch a server can have started: no interval starts epoch e
// unless e ≤ m + S, m the lowest epoch some interval has not finished (the epoch gate,
// pkg/pipeline), and m is at most u, the lowest epoch graph server 0's own intervals have not
// finished, which it knows exactly (its view of the others' lags). So D = u + S + drainMargin:
// for a peer to start an epoch past D before the Stop reaches it, graph server 0 would have to
// finish drainMargin + 1 epochs in that time; were it to, the parameter servers would not be
// at an epoch boundary and would keep their last checkpoint. Graph server 0 sends every server
// Stop{StopAfter: D, Preempt}; each finishes the epochs up to D and starts none later, so that
// every gradient of an epoch up to D is pushed and none of a later one: an epoch boundary,
// which the parameter servers save when they stop. A server is drained once every interval,
// its own and its peers', finished D (graph server 0 also once every partition reported D); it
// waits for its messages in flight, so that its peers drain too, and Run returns ErrPreempted.
// A message or evaluation pass that fails meanwhile is dropped: a peer that drained exits. The
// drain is bounded by Config.DrainTimeout.

// preempt starts the run's preemption, once: graph server 0 chooses the drain and stops every
// server there, another server asks graph server 0 to. A server not training yet (still
// connecting, or an inference) has nothing to drain and stops at once; one whose run has
// trained its last epoch just stops (errStopped).
func (l *loop) preempt() error {
	if l.sched == nil {
		return ErrPreempted
	}
	if l.preempting {
		return nil
	}
	if l.sched.Finished() {
		return errStopped
	}
	l.preempting, l.out.drain = true, true
	if l.coord == nil {
		l.out.sendPreempt = &rpc.CommandRequest{Preempt: true, From: uint32(l.cfg.Partition)}
		return nil
	}
	return l.command([]*rpc.CommandRequest{l.coord.preempt(drainEnd(l.sched.Progress()[l.cfg.Partition], l.cfg.Staleness.Bound()))}, nil)
}

// drainEnd returns the last epoch of a preemption's drain chosen by graph server 0, whose
// intervals have not finished the epochs in unfinished, with staleness bound s (0: synchronous).
func drainEnd(unfinished []int, s int) int {
	return slices.Min(unfinished) + s + drainMargin
}

// drained reports whether the drain of a preemption has ended here: every interval, local or
// observed, finished the last epoch and no local task runs; on graph server 0 also every
// partition's report of it is in.
func (l *loop) drained() bool {
	if !l.draining || !l.sched.Finished() {
		return false
	}
	return l.coord == nil || l.coord.next > l.sched.LastEpoch()
}

// preempt stops the run after epoch d, or its last if earlier, for a preemption: it starts no
// more evaluations (their results would not be reported) and returns the command.
func (c *coordinator) preempt(d int) *rpc.CommandRequest {
	c.preempted = true
	cmd := c.stop(min(d, c.last()))
	for _, ev := range c.queue {
		c.pins.unpin(ev.Version)
	}
	c.queue = c.queue[:0]
	cmd.Preempt = true
	return cmd
}

// drainedAt writes the epochs completed, evaluated or not, and the preemption after epoch
// last, the epoch the parameter servers checkpoint.
func (c *coordinator) drainedAt(last int) {
	for i := range c.lines {
		c.lines[i].pending = false
	}
	c.flush()
	c.emit(Event{Event: EventPreempted, Epoch: last + 1})
}
