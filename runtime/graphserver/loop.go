package graphserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/internal/procmem"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// event is something that happened, handed to the loop; the types below are all there are.
type event interface{ isEvent() }

type (
	// taskDone: a local task finished at end (the trace's clock; loss: the output layer's AV's).
	taskDone struct {
		task pipeline.Task
		loss float64
		end  int64
	}
	// rowsArrived: a peer's SC or ∇SC rows are stored.
	rowsArrived struct{ task pipeline.Task }
	// progressed: a peer reports its tasks done (WU, which sends no rows).
	progressed struct{ tasks []pipeline.Task }
	// shardMoved: a shard's version and the epoch of its newest checkpoint, from a push's
	// reply or its version stream.
	shardMoved struct{ shard, version, checkpoint int }
	// commanded: the coordinator's stop or evaluate.
	commanded struct{ cmd *rpc.CommandRequest }
	// evalFinished: this server's evaluation pass at version ended.
	evalFinished struct{ version uint64 }
	// epochReported: a partition finished an epoch (coordinator only); a peer's report
	// waits for the verdict.
	epochReported struct {
		rep     *rpc.EpochReport
		verdict chan<- error
	}
	// evalReported: a partition finished an evaluation pass (coordinator only); a peer's
	// report waits for the verdict.
	evalReported struct {
		rep     *rpc.EvalReport
		verdict chan<- error
	}
	// exported: graph server 0 wrote its part of export pass x; files are all the files written.
	exported struct {
		x     *pendingExport
		files []string
	}
)

func (taskDone) isEvent()      {}
func (rowsArrived) isEvent()   {}
func (progressed) isEvent()    {}
func (shardMoved) isEvent()    {}
func (commanded) isEvent()     {}
func (evalFinished) isEvent()  {}
func (epochReported) isEvent() {}
func (evalReported) isEvent()  {}
func (exported) isEvent()      {}

// server is one graph server.
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

	// The loop (loop.go): the goroutines' owner, the events, and the state only the loop touches.
	g      *errgroup.Group
	ctx    context.Context
	events chan event
	sched  *pipeline.Scheduler
	epochs map[int]*epochTally
	coord  *coordinator // graph server 0 only
	idle   *idleTracker // with Config.Trace
}

// drive is the loop: it starts every ready task, steps on every event, and never blocks on
// I/O. It returns when ctx ends (nil if it was cancelled) or a step fails.
func (s *server) drive(ctx context.Context) error {
	var ready []pipeline.Task
	for {
		if s.sched != nil { // an inference runs no tasks
			ready = s.sched.AppendReady(ready[:0])
		}
		for _, t := range ready {
			st, err := s.sched.Start(t)
			if err != nil {
				return err
			}
			if t.Kind == pipeline.KindAV && t.Layer == 0 {
				s.publishKeep() // the epoch pinned a version
			}
			s.idle.started(st)
			s.spawn(func(ctx context.Context) error { return s.exec(ctx, st) })
		}
		select {
		case ev := <-s.events:
			if err := s.step(ev); err != nil {
				return err
			}
			if s.sched != nil {
				s.idle.observe(s.sched)
			}
		case <-ctx.Done():
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return nil
		}
	}
}

// step does what the server does about ev.
func (s *server) step(ev event) error {
	switch ev := ev.(type) {
	case taskDone:
		if err := s.sched.Done(ev.task); err != nil {
			return err
		}
		t := ev.task
		s.idle.done(t, ev.end)
		if t.Kind == pipeline.KindAV && t.Layer == s.lay.layers() {
			s.tally(t.Epoch).loss += ev.loss
		}
		if t.Kind == pipeline.KindWU {
			s.publishKeep()
			s.weights.release(s.keep.load())
			s.broadcastProgress(t)
			a := s.tally(t.Epoch)
			if a.n++; a.n == s.cfg.Intervals {
				delete(s.epochs, t.Epoch)
				calls := s.billing.take()
				return s.reportEpoch(&rpc.EpochReport{From: uint32(s.cfg.Partition), Epoch: uint32(t.Epoch), Loss: a.loss,
					BytesSent: s.peers.sent.Swap(0), Calls: uint64(calls.Requests), BilledNs: uint64(calls.Billed),
					PeakRssBytes: uint64(procmem.Self().Peak)})
			}
		}
	case rowsArrived:
		return s.sched.Observe(ev.task)
	case progressed:
		for _, t := range ev.tasks {
			if err := s.sched.Observe(t); err != nil {
				return err
			}
		}
	case shardMoved:
		sh := s.shards.list[ev.shard]
		sh.checkpoint = max(sh.checkpoint, ev.checkpoint)
		if s.coord != nil {
			s.coord.checkpointed(s.shards.lowest(func(sh *shard) int { return sh.checkpoint }))
		}
		return s.shardVersion(ev.shard, ev.version)
	case commanded:
		return s.apply(ev.cmd)
	case evalFinished:
		s.keep.unpin(ev.version)
		s.publishKeep()
	case epochReported:
		if ok, err := admit(s.coord.admitEpoch(ev.rep), ev.verdict); !ok {
			return err
		}
		cmds, err := s.coord.epochDone(ev.rep, s.sched.WeightVersion())
		return s.command(cmds, err)
	case evalReported:
		if ok, err := admit(s.coord.admitEval(ev.rep), ev.verdict); !ok {
			return err
		}
		cmds, err := s.coord.evalDone(ev.rep)
		if x := s.coord.takeExport(); x != nil {
			s.spawn(func(ctx context.Context) error { return s.writeModel(ctx, x) })
		}
		return s.command(cmds, err)
	case exported:
		s.keep.unpin(ev.x.version)
		s.publishKeep()
		return s.coord.exported(ev.x, ev.files)
	default:
		return fmt.Errorf("unknown event %T", ev)
	}
	return nil
}

// admit hands refused, the coordinator's verdict on a report, to the peer that waits for it
// (verdict not nil), and reports whether the report is taken; a refused report of the
// coordinator's own ends the run.
func admit(refused error, verdict chan<- error) (bool, error) {
	if verdict != nil {
		verdict <- refused
		return refused == nil, nil
	}
	return refused == nil, refused
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

// epochTally is a local epoch's training loss and finished WUs, until all intervals' are in.
type epochTally struct {
	loss float64
	n    int
}

func (s *server) tally(e int) *epochTally {
	a := s.epochs[e]
	if a == nil {
		a = &epochTally{}
		s.epochs[e] = a
	}
	return a
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
	d := cost.Calls{Requests: now.Requests - b.taken.Requests, Billed: now.Billed - b.taken.Billed}
	b.taken = now
	return d
}

// shardVersion records a shard's newest version; the weight version is the lowest over the
// shards. It is pulled only when an interval pins it (weightCache.at): every graph server's
// pushes make versions, so pulling each as it appears would pull every version to every graph
// server, graph servers times more than their intervals pin.
func (s *server) shardVersion(i, v int) error {
	s.shards.list[i].version = max(s.shards.list[i].version, v)
	low := s.shards.lowest(func(sh *shard) int { return sh.version })
	if low <= s.sched.WeightVersion() {
		return nil
	}
	if err := s.sched.SetWeightVersion(low); err != nil {
		return err
	}
	s.publishKeep()
	return nil
}

// apply carries out a coordinator's command.
func (s *server) apply(r *rpc.CommandRequest) error {
	if r.Stop {
		if err := s.sched.StopAfter(int(r.StopAfter)); err != nil {
			return err
		}
	}
	if ev := r.Evaluate; ev != nil {
		s.keep.pin(ev.Version)
		s.publishKeep()
		s.spawn(func(ctx context.Context) error { return s.evaluate(ctx, ev) })
	}
	return nil
}

// command sends the coordinator's commands to every peer and applies them here; err, the
// coordinator's, then ends the run.
func (s *server) command(cmds []*rpc.CommandRequest, err error) error {
	s.publishKeep() // the coordinator pins and unpins evaluations' versions
	for _, r := range cmds {
		s.spawn(func(ctx context.Context) error {
			return s.peers.each(ctx, "command", func(ctx context.Context, _ int, c rpc.GraphServerClient) error {
				_, err := c.Command(ctx, r)
				return err
			})
		})
		if err := s.apply(r); err != nil {
			return err
		}
	}
	return err
}

func (s *server) publishKeep() {
	if s.sched != nil { // an inference has no weight versions to keep
		s.keep.publish(s.sched.WeightVersion(), s.sched.PinnedVersions())
	}
}

// spawn runs f in the run's group; an error of f ends the run, unless the run is ending anyway.
func (s *server) spawn(f func(ctx context.Context) error) {
	s.g.Go(func() error {
		if err := f(s.ctx); err != nil && s.ctx.Err() == nil {
			return err
		}
		return nil
	})
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
		publish = s.publishShare
	}
	rep, err := s.eval.run(ctx, ev.Id, ev.Version, publish)
	if err != nil && ev.Export {
		return fmt.Errorf("%w: the export pass: %w", ErrExport, err)
	} else if err != nil {
		return fmt.Errorf("evaluation after epoch %d: %w", ev.Id+1, err)
	}
	calls := s.billing.take()
	rep.Calls, rep.BilledNs = uint64(calls.Requests), uint64(calls.Billed)
	s.post(evalFinished{ev.Version})
	if s.coord != nil {
		s.post(evalReported{rep: rep})
		return nil
	}
	return s.peers.call(ctx, 0, "report", func(ctx context.Context, _ int, c rpc.GraphServerClient) error {
		_, err := c.EvalDone(ctx, rep)
		return err
	})
}

// reportEpoch sends the partition's epoch report to the coordinator, or steps on it here.
func (s *server) reportEpoch(r *rpc.EpochReport) error {
	if s.coord != nil {
		return s.step(epochReported{rep: r})
	}
	s.spawn(func(ctx context.Context) error {
		return s.peers.call(ctx, 0, "report", func(ctx context.Context, _ int, c rpc.GraphServerClient) error {
			_, err := c.EpochDone(ctx, r)
			return err
		})
	})
	return nil
}

// broadcastProgress tells every peer that t is done.
func (s *server) broadcastProgress(t pipeline.Task) {
	r := &rpc.ProgressReport{From: uint32(s.cfg.Partition), Done: []*rpc.TaskRef{taskRef(t)}}
	s.spawn(func(ctx context.Context) error {
		return s.peers.each(ctx, "progress", func(ctx context.Context, _ int, c rpc.GraphServerClient) error {
			_, err := c.Progress(ctx, r)
			return err
		})
	})
}
