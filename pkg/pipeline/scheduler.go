package pipeline

import (
	"errors"
	"fmt"
)

// Errors the Scheduler's methods wrap, for callers to branch on with errors.Is.
var (
	ErrInvalidTask    = errors.New("no such task")                      // out of range, or a kind/layer pair not in Sequence
	ErrNotLocal       = errors.New("task of a partition run elsewhere") // Start or Done of a remote partition's task
	ErrLocal          = errors.New("task of a local partition")         // Observe of a local partition's task
	ErrNotReady       = errors.New("task not ready")                    // Start of a task whose dependencies are unmet
	ErrAlreadyStarted = errors.New("task already started")              // Start of a running task
	ErrNotStarted     = errors.New("task not started")                  // Done of a task that is not running
	ErrAlreadyDone    = errors.New("task already done")                 // Start or Done of a finished task
	ErrVersion        = errors.New("bad weight version")                // SetWeightVersion misuse
)

// Scheduler is the pipeline state machine of the package comment. It does no I/O and keeps no
// clock: the caller asks it what is Ready, tells it what it Starts and what is Done (and, for
// other servers' partitions, what it Observes), and does the work. It is not safe for
// concurrent use.
//
// Its state is split by concern: every interval's two lanes (lane.go), the rows each interval
// has produced for the others (flows.go), the ready sets (ready.go), the weight versions and
// pins (versions.go), and the steps of an epoch (steps.go).
type Scheduler struct {
	layers, epochs int
	n              int // intervals in all
	sync           bool
	stale          int // S; 0 in synchronous mode
	drain          int // Config.DrainEvery in asynchronous mode, else 0
	external       bool
	last           int // last epoch to run (StopAfter)

	ids      []IntervalID
	offset   []int   // global index of each partition's interval 0
	local    []bool  // per global interval
	localIDs []int32 // global indices of local intervals, ascending

	steps []step
	split int // index in steps of ∇GA_{L-1}, the first step of the tail
	lead  int // 1 when the head may run one epoch ahead of the tail, else 0

	iv       []ivState
	fl       flows
	readySet [2]bitset // by side: local intervals whose next task in that lane is ready (refresh)
	scratch  []Task    // AppendReady's sort buffer

	version int
	wu      [2]epochCount // synchronous mode: WUs done per recent epoch

	minUnf   int // lowest epoch not yet finished by any interval
	atMin    int // intervals whose lowest unfinished epoch is minUnf
	inFlight int
}

// New validates cfg and returns a scheduler at the start of epoch cfg.FirstEpoch (normally 0)
// with weight version 0 (in synchronous mode, FirstEpoch).
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{layers: cfg.Layers, epochs: cfg.Epochs, sync: cfg.Staleness.Sync(), stale: cfg.Staleness.Bound(),
		external: cfg.ExternalVersions, last: cfg.Epochs - 1, minUnf: cfg.FirstEpoch,
		wu: [2]epochCount{{-1, 0}, {-1, 0}}}
	s.layout(&cfg)
	s.steps, s.split = buildSteps(cfg.Layers, cfg.Gradients)
	if cfg.TailOverlap && !cfg.Staleness.Sync() && cfg.Staleness.Bound() > 0 {
		s.lead = 1
	}
	s.fl = newFlows(&cfg, s.ids, s.offset)
	s.iv = make([]ivState, s.n)
	for g := range s.iv {
		s.iv[g] = newIvState(cfg.FirstEpoch, s.split)
	}
	s.atMin = s.n
	if cfg.Staleness.Sync() {
		s.version = cfg.FirstEpoch
	} else {
		s.drain = cfg.DrainEvery
	}
	s.readySet = [2]bitset{newBitset(s.n), newBitset(s.n)}
	s.refreshAll()
	return s, nil
}

// layout numbers the intervals of every partition globally and marks the local ones.
func (s *Scheduler) layout(cfg *Config) {
	localPart := make([]bool, cfg.Partitions)
	for p := range localPart {
		localPart[p] = cfg.Local == nil
	}
	for _, p := range cfg.Local {
		localPart[p] = true
	}
	for p, c := range cfg.intervalCounts() {
		s.offset = append(s.offset, len(s.ids))
		for i := 0; i < c; i++ {
			s.ids = append(s.ids, IntervalID{p, i})
			s.local = append(s.local, localPart[p])
			if localPart[p] {
				s.localIDs = append(s.localIDs, int32(len(s.ids)-1))
			}
		}
	}
	s.n = len(s.ids)
}

// locate checks t and returns its global interval index and its step index.
func (s *Scheduler) locate(t Task) (g, si int, err error) {
	if t.Partition < 0 || t.Partition >= len(s.offset) {
		return 0, 0, fmt.Errorf("%v: partition out of range 0..%d: %w", t, len(s.offset)-1, ErrInvalidTask)
	}
	end := s.n
	if t.Partition+1 < len(s.offset) {
		end = s.offset[t.Partition+1]
	}
	if t.Interval < 0 || t.Interval >= end-s.offset[t.Partition] {
		return 0, 0, fmt.Errorf("%v: interval out of range 0..%d: %w", t, end-s.offset[t.Partition]-1, ErrInvalidTask)
	}
	if t.Epoch < 0 || t.Epoch >= s.epochs {
		return 0, 0, fmt.Errorf("%v: epoch out of range 0..%d: %w", t, s.epochs-1, ErrInvalidTask)
	}
	si = stepIndex(t.Kind, t.Layer, s.layers)
	if si < 0 {
		return 0, 0, fmt.Errorf("%v: no such step with %d layers: %w", t, s.layers, ErrInvalidTask)
	}
	return s.offset[t.Partition] + t.Interval, si, nil
}

// Start marks t running and returns what it must read. t must be a task Ready would return.
func (s *Scheduler) Start(t Task) (Started, error) {
	g, si, err := s.locate(t)
	if err != nil {
		return Started{}, fmt.Errorf("start %w", err)
	}
	if !s.local[g] {
		return Started{}, fmt.Errorf("start %v: %w", t, ErrNotLocal)
	}
	st := &s.iv[g]
	sd := s.sideOf(si)
	ln := &st.lanes[sd]
	switch c := s.cmpPos(g, t.Epoch, si); {
	case c < 0:
		return Started{}, fmt.Errorf("start %v: %w", t, ErrAlreadyDone)
	case c == 0 && ln.running:
		return Started{}, fmt.Errorf("start %v: %w", t, ErrAlreadyStarted)
	case c > 0:
		return Started{}, fmt.Errorf("start %v: %w: the next task of the interval's %v is %v", t, ErrNotReady, sd, s.task(g, sd))
	}
	var reason string
	if !s.ready(g, sd, &reason) {
		return Started{}, fmt.Errorf("start %v: %w: %s", t, ErrNotReady, reason)
	}
	sp := &s.steps[si]
	res := Started{Task: t, Weights: NoWeights}
	if sp.consumes >= 0 {
		if res.Reads, err = s.readsOf(sp.consumes, g, t.Epoch); err != nil {
			return Started{}, fmt.Errorf("start %v: %w", t, err)
		}
	}
	if si == 0 {
		st.lanes[head].pin = s.version
	}
	if sp.weights {
		res.Weights = s.pinOf(g, sd)
	}
	ln.running = true
	s.readySet[sd].clear(g)
	s.inFlight++
	return res, nil
}

// Done marks the running task t finished.
func (s *Scheduler) Done(t Task) error {
	g, si, err := s.locate(t)
	if err != nil {
		return fmt.Errorf("done %w", err)
	}
	if !s.local[g] {
		return fmt.Errorf("done %v: %w", t, ErrNotLocal)
	}
	sd := s.sideOf(si)
	ln := &s.iv[g].lanes[sd]
	switch c := s.cmpPos(g, t.Epoch, si); {
	case c < 0:
		return fmt.Errorf("done %v: %w", t, ErrAlreadyDone)
	case c > 0 || !ln.running:
		return fmt.Errorf("done %v: %w", t, ErrNotStarted)
	}
	ln.running = false
	s.inFlight--
	s.complete(g, sd)
	return nil
}

// Observe records that a remote partition's task t, and every task before it in its interval's
// sequence, is done: the caller has received its rows or heard of its progress. With
// Config.TailOverlap a head task implies only the tail of two epochs before it (the tail of the
// epoch before may still run), a tail task the head of its own epoch. Observing a task already
// known to be done does nothing, so reports may arrive late or out of order.
func (s *Scheduler) Observe(t Task) error {
	g, si, err := s.locate(t)
	if err != nil {
		return fmt.Errorf("observe %w", err)
	}
	if s.local[g] {
		return fmt.Errorf("observe %v: %w", t, ErrLocal)
	}
	sd := s.sideOf(si)
	for s.cmpPos(g, t.Epoch, si) >= 0 {
		switch {
		case sd == tail && !s.tailReached(g):
			s.complete(g, head) // the head of the tail's epoch first
		case sd == head && s.iv[g].lanes[head].step == s.split:
			s.complete(g, tail) // the head waits for the tail
		default:
			s.complete(g, sd)
		}
	}
	return nil
}

// complete finishes interval g's next task in lane sd.
func (s *Scheduler) complete(g int, sd side) {
	ln := &s.iv[g].lanes[sd]
	e := ln.epoch
	if f := s.steps[ln.step].produces; f >= 0 {
		s.produce(f, g, e)
	}
	ln.step++
	switch {
	case sd == head:
		if ln.step == s.split {
			s.unpark(g)
		}
		s.refresh(g)
		return
	case ln.step < len(s.steps):
		s.refresh(g)
		return
	}
	// WU: the interval's epoch is finished.
	all := s.versionAfterWU(e) // whether every local interval's readiness may have changed
	ln.step, ln.pin = s.split, -1
	ln.epoch++
	s.unpark(g)
	if s.epochFinished(e, ln.epoch) {
		all = true
	}
	if all {
		s.refreshAll()
	} else {
		s.refresh(g)
	}
}

// epochFinished records that an interval finished epoch e and is now at epoch next, and reports
// whether that moved the lowest unfinished epoch (the base of the epoch gate).
func (s *Scheduler) epochFinished(e, next int) bool {
	if e != s.minUnf {
		return false
	}
	if s.atMin--; s.atMin > 0 {
		return false
	}
	s.minUnf, s.atMin = next, 0
	for h := range s.iv {
		switch ep := s.iv[h].lanes[tail].epoch; {
		case ep < s.minUnf:
			s.minUnf, s.atMin = ep, 1
		case ep == s.minUnf:
			s.atMin++
		}
	}
	return true
}

// StopAfter ends the run after epoch e: no task of a later epoch becomes ready (tasks already
// running may still be reported Done). It only ever moves the end earlier.
func (s *Scheduler) StopAfter(e int) error {
	if e < 0 {
		return fmt.Errorf("stop after epoch %d: want at least 0", e)
	}
	s.last = min(s.last, e)
	s.refreshAll()
	return nil
}

// The observers below answer questions about the run's state without changing it. Graph
// servers need them only for a preemption's drain (runtime/graphserver/preempt.go: Progress,
// Finished, LastEpoch; otherwise they use AppendReady, WeightVersion and PinnedVersions); the
// property tests check the scheduler with them after every step, and tools may show them.

// LastEpoch returns the last epoch the run goes to: Epochs-1, or what StopAfter set.
func (s *Scheduler) LastEpoch() int { return s.last }

// Finished reports whether every interval, local or observed, has finished LastEpoch and no
// local task is running.
func (s *Scheduler) Finished() bool {
	return s.inFlight == 0 && s.minUnf > s.last
}

// LocalFinished reports whether every local interval has finished LastEpoch and no local task
// is running; other partitions may still be working.
func (s *Scheduler) LocalFinished() bool {
	if s.inFlight != 0 {
		return false
	}
	for g := range s.iv {
		if s.local[g] && s.iv[g].lanes[tail].epoch <= s.last {
			return false
		}
	}
	return true
}

// InFlight returns the number of local tasks started and not yet done.
func (s *Scheduler) InFlight() int { return s.inFlight }

// LowestUnfinished returns the lowest epoch not yet finished by any interval (local or
// observed): the base of the epoch gate.
func (s *Scheduler) LowestUnfinished() int { return s.minUnf }

// Progress returns, for each partition and each of its intervals, the lowest epoch the
// interval has not finished (as far as this scheduler knows, for remote ones).
func (s *Scheduler) Progress() [][]int {
	out := make([][]int, len(s.offset))
	all := make([]int, s.n)
	for g := range s.iv {
		all[g] = s.iv[g].lanes[tail].epoch
	}
	for p, off := range s.offset {
		end := s.n
		if p+1 < len(s.offset) {
			end = s.offset[p+1]
		}
		out[p] = all[off:end:end]
	}
	return out
}

// Next returns interval id's first unfinished task in Sequence order (the tail's while it is
// behind the head), whether or not it is ready or running; false when the interval has
// finished LastEpoch or does not exist.
func (s *Scheduler) Next(id IntervalID) (Task, bool) {
	if id.Partition < 0 || id.Partition >= len(s.offset) {
		return Task{}, false
	}
	g := s.offset[id.Partition] + id.Interval
	end := s.n
	if id.Partition+1 < len(s.offset) {
		end = s.offset[id.Partition+1]
	}
	if id.Interval < 0 || g >= end || s.iv[g].lanes[tail].epoch > s.last {
		return Task{}, false
	}
	if s.tailReached(g) {
		return s.task(g, tail), true
	}
	return s.task(g, head), true
}

// Running returns the local tasks started and not yet done, in global interval order (an
// interval's tail task before its head task).
func (s *Scheduler) Running() []Task {
	out := make([]Task, 0, s.inFlight)
	for g := range s.iv {
		for _, sd := range [...]side{tail, head} {
			if s.iv[g].lanes[sd].running {
				out = append(out, s.task(g, sd))
			}
		}
	}
	return out
}
