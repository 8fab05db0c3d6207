package graphserver

import (
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// event is something that happened, handed to the loop; the types below are all there are.
type event interface{ isEvent() }

type (
	// trainFrom: the run trains from epoch first (the loop's first event).
	trainFrom struct{ first int }
	// inferWith: the run is an inference with the loaded weights (the loop's first event).
	inferWith struct{}
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
	// preempted: the run is preempted (this server's SIGTERM, a peer's or a parameter
	// server's notice).
	preempted struct{}
	// evalReported: a partition finished an evaluation pass (coordinator only); a peer's
	// report waits for the verdict.
	evalReported struct {
		rep     *rpc.EvalReport
		verdict chan<- error
	}
	// exportWritten: graph server 0 wrote its part of export pass x; files are all the files written.
	exportWritten struct {
		x     *pendingExport
		files []string
	}
)

func (trainFrom) isEvent()     {}
func (inferWith) isEvent()     {}
func (taskDone) isEvent()      {}
func (rowsArrived) isEvent()   {}
func (progressed) isEvent()    {}
func (shardMoved) isEvent()    {}
func (commanded) isEvent()     {}
func (evalFinished) isEvent()  {}
func (epochReported) isEvent() {}
func (evalReported) isEvent()  {}
func (preempted) isEvent()     {}
func (exportWritten) isEvent() {}

// loop is the graph server's state machine: the scheduler and the run's bookkeeping, which
// only the loop goroutine touches. step takes one event and returns the effects to carry out —
// messages to send, reports to write, tasks to start — as raft's Ready; it does no I/O and
// starts no goroutine, so that the driver (drive.go) carries them out and a test can step a
// server through a run by hand.
type loop struct {
	cfg  *Config
	pipe pipeline.Config // the scheduler's, but for the first epoch
	// The weight versions in use, and the shards' versions and checkpoints as last heard.
	keep    *keeper
	weights *weightCache
	shards  *shards
	coord   *coordinator // graph server 0 only
	// measure reads what an epoch report carries from outside the loop.
	measure func() usage

	sched  *pipeline.Scheduler // nil before training, and in an inference
	epochs map[int]*epochTally
	idle   *idleTracker // with Config.Trace
	ready  []pipeline.Task
	out    effects
	// preempting: the run is being preempted (preempt.go); draining: graph server 0's Stop of
	// the drain is applied.
	preempting, draining bool
}

// usage is what a partition's epoch report carries from outside the loop: the tensor calls
// billed and the tensor payload bytes sent to peers since the last epoch, and the process's
// peak resident memory.
type usage struct {
	calls   cost.Calls
	sent    uint64
	peakRSS uint64
}

// newLoop returns the loop of a server of cfg whose scheduler will run pipe; graph server 0's
// coordinates a graph of totals (train, val, test).
func newLoop(cfg *Config, pipe pipeline.Config, totals [3]int, keep *keeper, weights *weightCache, shards *shards, measure func() usage) *loop {
	l := &loop{cfg: cfg, pipe: pipe, keep: keep, weights: weights, shards: shards, measure: measure, epochs: map[int]*epochTally{}}
	if cfg.Partition == 0 {
		l.coord = newCoordinator(cfg, totals, keep, &l.out)
	}
	return l
}

// step does what the server does about ev, and starts every task that became ready. It returns
// what the driver is to carry out, also when it fails (the run then ends once that is done).
func (l *loop) step(ev event) (effects, error) {
	l.out.reset()
	err := l.take(ev)
	if err == nil && l.sched != nil {
		l.idle.observe(l.sched)
		err = l.startReady()
	}
	if err == nil && l.sched != nil && l.drained() {
		if l.coord != nil {
			l.coord.drainedAt(l.sched.LastEpoch())
		}
		err = ErrPreempted
	}
	return l.out, err
}

// take changes the state as ev says.
func (l *loop) take(ev event) error {
	switch ev := ev.(type) {
	case trainFrom:
		return l.begin(ev.first)
	case inferWith:
		if l.coord != nil { // the export pass with the loaded weights, version 0
			return l.command([]*rpc.CommandRequest{l.coord.startExport(Event{}, 0)}, nil)
		}
	case taskDone:
		return l.done(ev)
	case rowsArrived:
		return l.sched.Observe(ev.task)
	case progressed:
		for _, t := range ev.tasks {
			if err := l.sched.Observe(t); err != nil {
				return err
			}
		}
	case shardMoved:
		sh := l.shards.list[ev.shard]
		sh.checkpoint = max(sh.checkpoint, ev.checkpoint)
		if l.coord != nil {
			l.coord.checkpointed(l.shards.lowest(func(sh *shard) int { return sh.checkpoint }))
		}
		return l.shardVersion(ev.shard, ev.version)
	case commanded:
		return l.apply(ev.cmd)
	case preempted:
		return l.preempt()
	case evalFinished:
		l.keep.unpin(ev.version)
		l.publishKeep()
	case epochReported:
		return l.epochReport(ev.rep, ev.verdict)
	case evalReported:
		if ok, err := l.admit(l.coord.admitEval(ev.rep), ev.verdict); !ok {
			return err
		}
		cmds, err := l.coord.evalDone(ev.rep)
		l.out.writeExport = l.coord.takeExport()
		return l.command(cmds, err)
	case exportWritten:
		l.keep.unpin(ev.x.version)
		l.publishKeep()
		l.coord.exported(ev.x, ev.files)
	default:
		return fmt.Errorf("unknown event %T", ev)
	}
	return nil
}

// begin makes the scheduler of training from epoch first at the shards' weight version, and
// starts the coordinator's clock.
func (l *loop) begin(first int) error {
	pc := l.pipe
	pc.FirstEpoch = first
	var err error
	if l.sched, err = pipeline.New(pc); err != nil {
		return err
	}
	if err := l.sched.SetWeightVersion(l.shards.lowest(func(sh *shard) int { return sh.version })); err != nil {
		return err
	}
	if l.coord != nil {
		l.coord.begin(first)
	}
	l.idle = newIdleTracker(l.cfg.Trace, l.cfg.Partition, l.cfg.Intervals)
	return nil
}

// startReady starts every ready task in the scheduler, for the driver to run.
func (l *loop) startReady() error {
	l.ready = l.sched.AppendReady(l.ready[:0])
	for _, t := range l.ready {
		st, err := l.sched.Start(t)
		if err != nil {
			return err
		}
		if t.Kind == pipeline.KindAV && t.Layer == 0 {
			l.publishKeep() // the epoch pinned a version
		}
		l.idle.started(st)
		l.out.runTasks = append(l.out.runTasks, st)
	}
	return nil
}

// done records a local task's end: the output layer's AV adds its loss to the epoch's, and a
// WU tells every peer and, the epoch's last, reports the partition's epoch.
func (l *loop) done(ev taskDone) error {
	t := ev.task
	if err := l.sched.Done(t); err != nil {
		return err
	}
	l.idle.done(t, ev.end)
	if t.Kind == pipeline.KindAV && t.Layer == l.pipe.Layers {
		l.tally(t.Epoch).loss += ev.loss
	}
	if t.Kind != pipeline.KindWU {
		return nil
	}
	l.publishKeep()
	l.weights.release(l.keep.load())
	l.out.sendProgress = append(l.out.sendProgress, &rpc.ProgressReport{From: uint32(l.cfg.Partition), Done: []*rpc.TaskRef{taskRef(t)}})
	a := l.tally(t.Epoch)
	if a.n++; a.n < l.cfg.Intervals {
		return nil
	}
	delete(l.epochs, t.Epoch)
	u := l.measure()
	r := &rpc.EpochReport{From: uint32(l.cfg.Partition), Epoch: uint32(t.Epoch), Loss: a.loss, BytesSent: u.sent,
		Calls: uint64(u.calls.Requests), BilledNs: uint64(u.calls.Billed), LocalTasks: uint64(u.calls.Local), PeakRssBytes: u.peakRSS}
	if l.coord == nil {
		l.out.sendReports = append(l.out.sendReports, r)
		return nil
	}
	return l.epochReport(r, nil)
}

// epochReport hands a partition's epoch report to the coordinator, and its commands to every
// server; verdict, if not nil, waits for the coordinator's verdict on a peer's report.
func (l *loop) epochReport(r *rpc.EpochReport, verdict chan<- error) error {
	if ok, err := l.admit(l.coord.admitEpoch(r), verdict); !ok {
		return err
	}
	cmds, err := l.coord.epochDone(r, l.sched.WeightVersion())
	return l.command(cmds, err)
}

// admit hands refused, the coordinator's verdict on a report, to the peer that waits for it
// on to (if not nil), and reports whether the report is taken; a refused report of the
// coordinator's own ends the run.
func (l *loop) admit(refused error, to chan<- error) (bool, error) {
	if to != nil {
		l.out.answers = append(l.out.answers, verdict{to, refused})
		return refused == nil, nil
	}
	return refused == nil, refused
}

// epochTally is a local epoch's training loss and finished WUs, until all intervals' are in.
type epochTally struct {
	loss float64
	n    int
}

func (l *loop) tally(e int) *epochTally {
	a := l.epochs[e]
	if a == nil {
		a = &epochTally{}
		l.epochs[e] = a
	}
	return a
}

// shardVersion records a shard's newest version; the weight version is the lowest over the
// shards. It is pulled only when an interval pins it (weightCache.at): every graph server's
// pushes make versions, so pulling each as it appears would pull every version to every graph
// server, graph servers times more than their intervals pin.
func (l *loop) shardVersion(i, v int) error {
	l.shards.list[i].version = max(l.shards.list[i].version, v)
	low := l.shards.lowest(func(sh *shard) int { return sh.version })
	if low <= l.sched.WeightVersion() {
		return nil
	}
	if err := l.sched.SetWeightVersion(low); err != nil {
		return err
	}
	l.publishKeep()
	return nil
}

// apply carries out a coordinator's command here.
func (l *loop) apply(r *rpc.CommandRequest) error {
	if r.Stop && r.Preempt {
		if l.sched == nil { // graph server 0 preempted the run before this one began training
			return ErrPreempted
		}
		l.out.drain = l.out.drain || !l.preempting
		l.preempting, l.draining = true, true
	}
	if r.Stop {
		if err := l.sched.StopAfter(int(r.StopAfter)); err != nil {
			return err
		}
	}
	if ev := r.Evaluate; ev != nil {
		l.keep.pin(ev.Version)
		l.publishKeep()
		l.out.runPasses = append(l.out.runPasses, ev)
	}
	return nil
}

// command sends the coordinator's commands to every peer and applies them here; err, the
// coordinator's, then ends the run.
func (l *loop) command(cmds []*rpc.CommandRequest, err error) error {
	l.publishKeep() // the coordinator pins and unpins evaluations' versions
	for _, r := range cmds {
		l.out.sendCommands = append(l.out.sendCommands, r)
		if err := l.apply(r); err != nil {
			return err
		}
	}
	return err
}

func (l *loop) publishKeep() {
	if l.sched != nil { // an inference has no weight versions to keep
		l.keep.publish(l.sched.WeightVersion(), l.sched.PinnedVersions())
	}
}
