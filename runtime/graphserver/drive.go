package graphserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/internal/procmem"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// server is one graph server: its loop (loop.go), and the driver that steps the loop on every
// event and carries out what each step asks, in goroutines of one group.
type server struct {
	cfg Config

	// What it trains: the partition's buffers, the model, and the tasks over both.
	lay   *layout
	model variant
	shape modelShape
	tasks *runner
	eval  *evaluator

	// Whom it talks to, and the weight versions in use.
	peers   *peers
	shards  *shards
	weights *weightCache
	keep    *keeper
	// What its tensor calls were billed, handed to its epoch and evaluation reports.
	billing *billing
	metrics *metrics

	// The goroutines' owner, the events, the loop they are handed to, and what graph server 0
	// reports.
	g       *errgroup.Group
	ctx     context.Context
	events  chan event
	loop    *loop
	reports *reportWriter
	// driving: the loop runs (a preemption before it has nothing to drain); draining: a
	// preemption's drain began (preempt.go); flight: the messages sent and not yet answered.
	driving, draining atomic.Bool
	flight            sync.WaitGroup
}

// drive steps the loop on first and then on every event, carrying out what each step asks
// (carry) and never blocking on I/O but for graph server 0's progress lines. It returns when
// ctx ends (nil if it was cancelled) or a step fails.
func (s *server) drive(ctx context.Context, first event) error {
	ev := first
	s.driving.Store(true)
	for {
		out, err := s.loop.step(ev)
		if werr := s.carry(out); err == nil {
			err = werr
		}
		if errors.Is(err, ErrPreempted) {
			s.flight.Wait() // the peers drain on what this server sent them
		}
		if err != nil {
			return err
		}
		select {
		case ev = <-s.events:
		case <-ctx.Done():
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return nil
		}
	}
}

// carry carries out one step's effects: it answers the peers' reports, writes graph server 0's
// reports, and starts the sends and the tasks in the run's group. It returns the error of a
// report that could not be written.
func (s *server) carry(out effects) error {
	for _, v := range out.answers {
		v.to <- v.err
	}
	err := s.reports.write(&out)
	for _, r := range out.sendProgress {
		s.send(-1, "progress", func(ctx context.Context, c rpc.GraphServerClient) error {
			_, err := c.Progress(ctx, r)
			return err
		})
	}
	for _, r := range out.sendReports {
		s.send(0, "report", func(ctx context.Context, c rpc.GraphServerClient) error {
			_, err := c.EpochDone(ctx, r)
			return err
		})
	}
	for _, r := range out.sendCommands {
		s.send(-1, "command", func(ctx context.Context, c rpc.GraphServerClient) error {
			_, err := c.Command(ctx, r)
			return err
		})
	}
	if r := out.sendPreempt; r != nil {
		s.send(0, "preemption", func(ctx context.Context, c rpc.GraphServerClient) error {
			_, err := c.Command(ctx, r)
			return err
		})
	}
	if out.drain {
		s.startDrain()
	}
	for _, ev := range out.runPasses {
		s.spawnLink(func(ctx context.Context) error { return s.evaluate(ctx, ev) })
	}
	if x := out.writeExport; x != nil {
		s.spawn(func(ctx context.Context) error {
			files, err := writeModel(ctx, &s.cfg, x, s.weights, s.model)
			if err == nil {
				s.post(exportWritten{x, files})
			}
			return err
		})
	}
	for _, st := range out.runTasks {
		s.spawn(func(ctx context.Context) error { return s.exec(ctx, st) })
	}
	return err
}

// send makes call, a message named what, to graph server q (-1: every peer) in a goroutine of
// the run.
func (s *server) send(q int, what string, call func(ctx context.Context, c rpc.GraphServerClient) error) {
	one := func(ctx context.Context, _ int, c rpc.GraphServerClient) error { return call(ctx, c) }
	s.flight.Add(1)
	s.spawnLink(func(ctx context.Context) error {
		defer s.flight.Done()
		if q < 0 {
			return s.peers.each(ctx, what, one)
		}
		return s.peers.call(ctx, q, what, one)
	})
}

// measure reads what the loop's epoch reports carry from outside it.
func (s *server) measure() usage {
	return usage{calls: s.billing.take(), sent: s.peers.sent.Swap(0), peakRSS: uint64(procmem.Self().Peak)}
}

// ask posts ev, a peer's report, and returns the verdict the loop sends on verdict: nil, an
// error wrapping errRefused, or a status error when ctx ends or the server stops first.
func (s *server) ask(ctx context.Context, ev event, verdict <-chan error) error {
	s.post(ev)
	select {
	case err := <-verdict:
		return err
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-s.ctx.Done():
		return status.Errorf(codes.Unavailable, "graph server %d is stopping", s.cfg.Partition)
	}
}

// spawn runs f in the run's group; an error of f ends the run, unless the run is ending anyway.
func (s *server) spawn(f func(ctx context.Context) error) { s.spawnAs(false, f) }

// spawnLink is spawn for a message to peers, a pass with them or a watch on them: once a
// preemption's drain began its failure is dropped, since a peer that drained exits.
func (s *server) spawnLink(f func(ctx context.Context) error) { s.spawnAs(true, f) }

func (s *server) spawnAs(link bool, f func(ctx context.Context) error) {
	s.g.Go(func() error {
		if err := f(s.ctx); err != nil && s.ctx.Err() == nil && !(link && s.draining.Load()) {
			return err
		}
		return nil
	})
}

// startDrain bounds a preemption's drain, which began, by Config.DrainTimeout.
func (s *server) startDrain() {
	s.draining.Store(true)
	d := cmp.Or(s.cfg.DrainTimeout, jobconfig.DefaultDrainTimeout)
	s.g.Go(func() error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return fmt.Errorf("%w: the drain did not end within %v", ErrPreempted, d)
		case <-s.ctx.Done():
			return nil
		}
	})
}

// awaitPreempt posts a preemption once Config.Preempt closes, or ends the run at once if the
// loop does not run yet.
func (s *server) awaitPreempt(ctx context.Context) error {
	select {
	case <-s.cfg.Preempt:
	case <-ctx.Done():
		return nil
	}
	if !s.driving.Load() {
		return fmt.Errorf("%w: before training began", ErrPreempted)
	}
	s.post(preempted{})
	return nil
}

// post hands ev to the loop.
func (s *server) post(ev event) {
	select {
	case s.events <- ev:
	case <-s.ctx.Done():
	}
}

// exec runs one task and reports its completion to the loop.
func (s *server) exec(ctx context.Context, st pipeline.Started) error {
	start, begin := time.Now(), s.cfg.Trace.Now()
	loss, bytes, err := s.tasks.run(ctx, st)
	s.metrics.finished(st, time.Since(start))
	if err != nil {
		return fmt.Errorf("%v: %w", st.Task, err)
	}
	end := s.cfg.Trace.Now()
	if s.cfg.Trace != nil {
		sp := taskSpan(st, trace.Kind(st.Task.Kind))
		sp.Start, sp.End, sp.Bytes = begin, end, bytes
		s.cfg.Trace.Add(sp)
	}
	s.post(taskDone{st.Task, loss, end})
	return nil
}

// evaluate runs an evaluation pass beside training, or the export pass, and reports it.
func (s *server) evaluate(ctx context.Context, ev *rpc.Evaluate) error {
	defer func(begin int64) {
		s.cfg.Trace.Add(trace.Span{Start: begin, End: s.cfg.Trace.Now(), Kind: trace.Eval, Lane: trace.EvalLane, Epoch: int32(ev.Id), Version: int32(ev.Version)})
	}(s.cfg.Trace.Now())
	var publish sharePublisher
	if ev.Export {
		if s.cfg.Export == nil {
			return fmt.Errorf("graph server %d has no output location for the export pass", s.cfg.Partition)
		}
		publish = shareWriter(&s.cfg)
	}
	rep, err := s.eval.run(ctx, ev.Id, ev.Version, publish)
	if err != nil && ev.Export {
		return fmt.Errorf("%w: the export pass: %w", ErrExport, err)
	} else if err != nil {
		return fmt.Errorf("evaluation after epoch %d: %w", ev.Id+1, err)
	}
	calls := s.billing.take()
	rep.Calls, rep.BilledNs, rep.LocalTasks = uint64(calls.Requests), uint64(calls.Billed), uint64(calls.Local)
	s.post(evalFinished{ev.Version})
	if s.cfg.Partition == 0 {
		s.post(evalReported{rep: rep})
		return nil
	}
	return s.peers.call(ctx, 0, "report", func(ctx context.Context, _ int, c rpc.GraphServerClient) error {
		_, err := c.EvalDone(ctx, rep)
		return err
	})
}

// billing hands out a backend's billed calls in parts, each call in one part, to the
// server's epoch and evaluation reports.
type billing struct {
	mu    sync.Mutex
	b     dispatch.Biller // nil: the backend bills nothing
	taken cost.Calls
}

func newBilling(b dispatch.Backend) *billing {
	bl, _ := b.(dispatch.Biller)
	return &billing{b: bl}
}

// take returns the calls billed since the last take.
func (b *billing) take() cost.Calls {
	if b.b == nil {
		return cost.Calls{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.b.Billing()
	d := cost.Calls{Requests: now.Requests - b.taken.Requests, Billed: now.Billed - b.taken.Billed, Local: now.Local - b.taken.Local}
	b.taken = now
	return d
}
