package pipeline

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
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

// Scheduler is the pipeline state machine of DESIGN.md section 5. It does no I/O and keeps no
// clock: the caller asks it what is Ready, tells it what it Starts and what is Done (and, for
// other servers' partitions, what it Observes), and does the work. It is not safe for
// concurrent use.
type Scheduler struct {
	layers, epochs int
	n              int // intervals in all
	sync           bool
	stale          int // S; 0 in synchronous mode
	external       bool
	last           int // last epoch to run (StopAfter)

	ids      []IntervalID
	offset   []int   // global index of each partition's interval 0
	local    []bool  // per global interval
	localIDs []int32 // global indices of local intervals, ascending
	scratch  []Task  // AppendReady's sort buffer
	// bit g of readyHead (readyTail): local interval g's head (tail) task is ready, kept up to
	// date by refresh
	readyHead, readyTail []uint64
	steps                []step
	split                int // index in steps of ∇GA_{L-1}, the first step of the tail
	lead                 int // 1 when the head may run one epoch ahead of the tail, else 0

	allToAll bool
	reads    [][]int32 // forward sources of each interval, nil when allToAll
	readBy   [][]int32 // intervals that read each interval, nil when allToAll

	iv []ivState

	// Per flow f (forward layer l is flow l, backward layer l is flow Layers+l) and interval g:
	// latest[f*n+g] is the newest epoch g produced (-1: none yet), have[f*n+g] how many of g's
	// sources for f have produced anything (unused when allToAll), haveAll[f] how many
	// intervals have produced anything, barrier[f] how many produced each recent epoch.
	latest  []int32
	have    []int32
	haveAll []int32
	barrier [][2]epochCount
	wu      [2]epochCount // synchronous mode: WUs done per recent epoch

	version  int
	minUnf   int // lowest epoch not yet finished by any interval
	atMin    int // intervals whose lowest unfinished epoch is minUnf
	inFlight int
}

// ivState is an interval's progress in two lanes. The head runs steps [0, split) of epoch head
// and then waits at split ("parked") until it may move to epoch head+1: once the tail has
// finished epoch head (lead 0), or has reached it (lead 1, Config.TailOverlap). The tail runs
// steps [split, len) of epoch epoch, the interval's lowest unfinished one, once the head has
// left them behind. With lead 0, head == epoch always and the lanes take turns: one task at a
// time, in Sequence order.
type ivState struct {
	epoch    int  // lowest unfinished epoch: the tail's
	step     int  // index in Sequence of the tail's next task, split..len-1
	running  bool // a tail task is running
	head     int  // the head's epoch, epoch or epoch+1
	hstep    int  // index in Sequence of the head's next task, 0..split (split: parked)
	hrunning bool // a head task is running
	hpin     int  // weight version the head's epoch pinned, -1 before its AV_0
	pin      int  // weight version epoch pinned, while head > epoch; -1 otherwise
	prevPin  int  // the version the previous epoch pinned, -1 if none
}

type epochCount struct{ epoch, count int }

type step struct {
	kind     Kind
	layer    int
	consumes int // flow read from other intervals, -1 if none
	produces int // flow other intervals read, -1 if none
	weights  bool
}

// New validates cfg and returns a scheduler at the start of epoch cfg.FirstEpoch (normally 0)
// with weight version 0 (in synchronous mode, FirstEpoch).
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	L := cfg.Layers
	s := &Scheduler{
		layers:   L,
		epochs:   cfg.Epochs,
		sync:     cfg.Sync,
		stale:    cfg.Staleness,
		external: cfg.ExternalVersions,
		last:     cfg.Epochs - 1,
	}
	counts := cfg.intervalCounts()
	localPart := make([]bool, cfg.Partitions)
	for p := range localPart {
		localPart[p] = cfg.Local == nil
	}
	for _, p := range cfg.Local {
		localPart[p] = true
	}
	for p, c := range counts {
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
	n := s.n

	for _, st := range Sequence(L) {
		sp := step{kind: st.Kind, layer: st.Layer, consumes: -1, produces: -1}
		switch st.Kind {
		case KindAV:
			sp.weights = st.Layer < L
			if cfg.Gradients == PullGradients && st.Layer == L {
				sp.produces = L + L - 1 // the loss gives dZ_{L-1}
			}
		case KindSC:
			sp.produces = st.Layer
		case KindGA:
			sp.consumes = st.Layer
		case KindBackGA:
			if cfg.Gradients == PullGradients {
				sp.consumes = L + st.Layer
			}
		case KindBackSC:
			if cfg.Gradients == PushGradients {
				sp.produces = L + st.Layer
			}
		case KindBackAV:
			sp.weights = true
			if cfg.Gradients == PushGradients {
				sp.consumes = L + st.Layer
			} else if st.Layer > 0 {
				sp.produces = L + st.Layer - 1 // dZ_{l-1}
			}
		case KindWU:
			sp.weights = true
		}
		s.steps = append(s.steps, sp)
	}
	s.split = stepIndex(KindBackGA, L-1, L)
	if cfg.TailOverlap && !cfg.Sync && cfg.Staleness > 0 {
		s.lead = 1
	}

	s.allToAll = cfg.Reads == nil
	if !s.allToAll {
		s.reads = make([][]int32, n)
		s.readBy = make([][]int32, n)
		all := make([]int32, n)
		for g := range all {
			all[g] = int32(g)
		}
		for g, id := range s.ids {
			srcs, ok := cfg.Reads[id]
			if !ok {
				s.reads[g] = all
				continue
			}
			r := make([]int32, 0, len(srcs))
			for _, src := range srcs {
				r = append(r, int32(s.offset[src.Partition]+src.Interval))
			}
			slices.Sort(r)
			s.reads[g] = slices.Compact(r)
		}
		for g, srcs := range s.reads {
			for _, src := range srcs {
				s.readBy[src] = append(s.readBy[src], int32(g))
			}
		}
	}

	flows := 2 * L
	s.latest = make([]int32, flows*n)
	for i := range s.latest {
		s.latest[i] = -1
	}
	if !s.allToAll {
		s.have = make([]int32, flows*n)
	}
	s.haveAll = make([]int32, flows)
	s.barrier = make([][2]epochCount, flows)
	for f := range s.barrier {
		s.barrier[f] = [2]epochCount{{-1, 0}, {-1, 0}}
	}
	s.wu = [2]epochCount{{-1, 0}, {-1, 0}}
	s.iv = make([]ivState, n)
	for g := range s.iv {
		s.iv[g] = ivState{epoch: cfg.FirstEpoch, step: s.split, head: cfg.FirstEpoch, hpin: -1, pin: -1, prevPin: -1}
	}
	s.minUnf = cfg.FirstEpoch
	if cfg.Sync {
		s.version = cfg.FirstEpoch
	}
	s.atMin = n
	s.readyHead, s.readyTail = make([]uint64, (n+63)/64), make([]uint64, (n+63)/64)
	s.refreshAll()
	return s, nil
}

// sources returns the intervals whose flow-f rows interval g reads, or nil for all of them.
func (s *Scheduler) sources(f, g int) []int32 {
	if s.allToAll {
		return nil
	}
	if f < s.layers {
		return s.reads[g]
	}
	return s.readBy[g]
}

// consumers returns the intervals that read g's flow-f rows, or nil for all of them.
func (s *Scheduler) consumers(f, g int) []int32 {
	if s.allToAll {
		return nil
	}
	if f < s.layers {
		return s.readBy[g]
	}
	return s.reads[g]
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

// isTail reports whether step si runs in the tail lane.
func (s *Scheduler) isTail(si int) bool { return si >= s.split }

// cmpPos compares the position (epoch, si) with the next task of interval g's lane of si.
func (s *Scheduler) cmpPos(g, epoch, si int) int {
	st := &s.iv[g]
	e, at := st.head, st.hstep
	if s.isTail(si) {
		e, at = st.epoch, st.step
	}
	if epoch != e {
		return epoch - e
	}
	return si - at
}

// laneRunning reports whether a task of interval g's lane of si is running.
func (s *Scheduler) laneRunning(g, si int) bool {
	if s.isTail(si) {
		return s.iv[g].running
	}
	return s.iv[g].hrunning
}

// task returns interval g's next task in the tail lane (tail) or the head lane.
func (s *Scheduler) task(g int, tail bool) Task {
	st := &s.iv[g]
	e, si := st.head, st.hstep
	if tail {
		e, si = st.epoch, st.step
	}
	sp := &s.steps[si]
	return Task{Partition: s.ids[g].Partition, Interval: s.ids[g].Interval, Epoch: e, Layer: sp.layer, Kind: sp.kind}
}

// tailReached reports whether the head has left the tail's next task behind.
func (s *Scheduler) tailReached(g int) bool {
	st := &s.iv[g]
	return st.head > st.epoch || st.hstep == s.split
}

// ready reports whether interval g's next task in the tail lane (tail) or the head lane may
// start; reason, when asked, says why not.
func (s *Scheduler) ready(g int, tail bool, reason *string) bool {
	st := &s.iv[g]
	why := func(format string, args ...any) bool {
		if reason != nil {
			*reason = fmt.Sprintf(format, args...)
		}
		return false
	}
	e, si, running := st.head, st.hstep, st.hrunning
	if tail {
		e, si, running = st.epoch, st.step, st.running
	}
	switch {
	case running:
		return why("another task of the interval's %s is running", laneName(tail))
	case e > s.last:
		return why("the run stops after epoch %d", s.last)
	case tail && !s.tailReached(g):
		return why("the interval's %v has not run yet", s.task(g, false))
	case !tail && si == s.split:
		return why("the interval's epoch %d has not finished (its next task is %v)", st.epoch, s.task(g, true))
	}
	if !tail && si == 0 {
		if e > s.minUnf+s.stale {
			return why("epoch gate: lowest unfinished epoch is %d, staleness %d", s.minUnf, s.stale)
		}
		if s.sync && st.prevPin >= 0 && s.version <= st.prevPin {
			return why("weights of epoch %d not updated yet (version %d)", e-1, s.version)
		}
	}
	f := s.steps[si].consumes
	if f < 0 {
		return true
	}
	if s.sync {
		b := s.barrier[f][e&1]
		if b.epoch == e && b.count == s.n {
			return true
		}
		got := 0
		if b.epoch == e {
			got = b.count
		}
		return why("barrier: %d of %d intervals have produced epoch %d's rows", got, s.n, e)
	}
	if s.allToAll {
		if int(s.haveAll[f]) == s.n {
			return true
		}
	} else if int(s.have[f*s.n+g]) == len(s.sources(f, g)) {
		return true
	}
	return why("a source interval has produced no rows yet")
}

func laneName(tail bool) string {
	if tail {
		return "tail (backward pass)"
	}
	return "head"
}

// Ready returns the tasks of local intervals whose dependencies are met and that are not
// started, at most one per interval (two, of different epochs, with Config.TailOverlap), ordered
// by epoch, then partition, then interval.
func (s *Scheduler) Ready() []Task {
	n := 0
	for w := range s.readyHead {
		n += bits.OnesCount64(s.readyHead[w]) + bits.OnesCount64(s.readyTail[w])
	}
	if n == 0 {
		return nil
	}
	return s.AppendReady(make([]Task, 0, n))
}

// AppendReady appends what Ready returns to dst and returns the extended slice.
func (s *Scheduler) AppendReady(dst []Task) []Task {
	start := len(dst)
	lo, hi := int(^uint(0)>>1), -1
	add := func(g int, tail bool) {
		t := s.task(g, tail)
		lo, hi = min(lo, t.Epoch), max(hi, t.Epoch)
		dst = append(dst, t)
	}
	for w := range s.readyHead {
		word := s.readyHead[w] | s.readyTail[w]
		for word != 0 {
			b := word & -word
			g := w<<6 | bits.TrailingZeros64(word)
			word &^= b
			// A tail task is of an older epoch than a head task of the same interval.
			if s.readyTail[w]&b != 0 {
				add(g, true)
			}
			if s.readyHead[w]&b != 0 {
				add(g, false)
			}
		}
	}
	if hi > lo {
		s.sortByEpoch(dst[start:], lo, hi)
	}
	return dst
}

// sortByEpoch sorts ts, which is in interval order, stably by epoch. The epochs span at most
// S + 2 values, so a counting sort does it in linear time.
func (s *Scheduler) sortByEpoch(ts []Task, lo, hi int) {
	span := hi - lo + 1
	if span > 64 {
		slices.SortStableFunc(ts, func(a, b Task) int { return a.Epoch - b.Epoch })
		return
	}
	var at [65]int
	for _, t := range ts {
		at[t.Epoch-lo+1]++
	}
	for i := 1; i <= span; i++ {
		at[i] += at[i-1]
	}
	s.scratch = append(s.scratch[:0], ts...)
	for _, t := range s.scratch {
		ts[at[t.Epoch-lo]] = t
		at[t.Epoch-lo]++
	}
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
	tail := s.isTail(si)
	switch c := s.cmpPos(g, t.Epoch, si); {
	case c < 0:
		return Started{}, fmt.Errorf("start %v: %w", t, ErrAlreadyDone)
	case c == 0 && s.laneRunning(g, si):
		return Started{}, fmt.Errorf("start %v: %w", t, ErrAlreadyStarted)
	case c > 0:
		return Started{}, fmt.Errorf("start %v: %w: the next task of the interval's %s is %v", t, ErrNotReady, laneName(tail), s.task(g, tail))
	}
	var reason string
	if !s.ready(g, tail, &reason) {
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
		st.hpin = s.version
	}
	if sp.weights {
		res.Weights = s.pinOf(g, tail)
	}
	if tail {
		st.running = true
		s.readyTail[g>>6] &^= 1 << (g & 63)
	} else {
		st.hrunning = true
		s.readyHead[g>>6] &^= 1 << (g & 63)
	}
	s.inFlight++
	return res, nil
}

// pinOf returns the weight version of interval g's epoch in the tail lane (tail) or the head.
func (s *Scheduler) pinOf(g int, tail bool) int {
	st := &s.iv[g]
	if tail && st.epoch < st.head {
		return st.pin
	}
	return st.hpin
}

// readsOf lists the epochs of the flow-f rows interval g reads at epoch e, checking the bound.
func (s *Scheduler) readsOf(f, g, e int) ([]Read, error) {
	srcs := s.sources(f, g)
	count := len(srcs)
	if srcs == nil {
		count = s.n
	}
	reads := make([]Read, count)
	for i := range reads {
		src := i
		if srcs != nil {
			src = int(srcs[i])
		}
		v := int(s.latest[f*s.n+src])
		if v < 0 || (s.sync && v != e) || e-v > s.stale+1 {
			// The epoch gate makes this impossible; refuse rather than hand out stale rows.
			return nil, fmt.Errorf("internal error: rows of %v are from epoch %d at epoch %d", s.ids[src], v, e)
		}
		reads[i] = Read{From: s.ids[src], Epoch: v}
	}
	return reads, nil
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
	tail := s.isTail(si)
	switch c := s.cmpPos(g, t.Epoch, si); {
	case c < 0:
		return fmt.Errorf("done %v: %w", t, ErrAlreadyDone)
	case c > 0 || !s.laneRunning(g, si):
		return fmt.Errorf("done %v: %w", t, ErrNotStarted)
	}
	if tail {
		s.iv[g].running = false
	} else {
		s.iv[g].hrunning = false
	}
	s.inFlight--
	s.complete(g, tail)
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
	tail := s.isTail(si)
	for s.cmpPos(g, t.Epoch, si) >= 0 {
		switch st := &s.iv[g]; {
		case tail && !s.tailReached(g):
			s.complete(g, false) // the head of the tail's epoch first
		case !tail && st.hstep == s.split:
			s.complete(g, true) // the head waits for the tail
		default:
			s.complete(g, tail)
		}
	}
	return nil
}

// complete finishes interval g's next task in the tail lane (tail) or the head lane.
func (s *Scheduler) complete(g int, tail bool) {
	st := &s.iv[g]
	if !tail {
		if f := s.steps[st.hstep].produces; f >= 0 {
			s.produce(f, g, st.head)
		}
		st.hstep++
		if st.hstep == s.split {
			s.unpark(g)
		}
		s.refresh(g)
		return
	}
	e := st.epoch
	if f := s.steps[st.step].produces; f >= 0 {
		s.produce(f, g, e)
	}
	st.step++
	if st.step < len(s.steps) {
		s.refresh(g)
		return
	}
	// WU: the interval's epoch is finished.
	all := false // whether every local interval's readiness may have changed
	if !s.external {
		if !s.sync {
			s.version++
		} else if s.count(&s.wu, e) == s.n {
			s.version++
			all = true
		}
	}
	st.step = s.split
	st.epoch++
	st.pin = -1
	s.unpark(g)
	if e == s.minUnf {
		s.atMin--
		if s.atMin == 0 {
			s.minUnf, s.atMin = st.epoch, 0
			for h := range s.iv {
				switch ep := s.iv[h].epoch; {
				case ep < s.minUnf:
					s.minUnf, s.atMin = ep, 1
				case ep == s.minUnf:
					s.atMin++
				}
			}
			all = true
		}
	}
	if all {
		s.refreshAll()
	} else {
		s.refresh(g)
	}
}

// unpark moves interval g's parked head to its next epoch once the tail allows it: once the
// tail has finished the head's epoch, or with lead 1 has reached it (the tail then keeps the
// epoch's pin).
func (s *Scheduler) unpark(g int) {
	st := &s.iv[g]
	if st.hstep != s.split || st.epoch < st.head+1-s.lead {
		return
	}
	if st.epoch == st.head {
		st.pin = st.hpin
	}
	st.prevPin, st.hpin = st.hpin, -1
	st.head++
	st.hstep = 0
}

// refresh recomputes whether interval g's next tasks are ready, if g is local.
func (s *Scheduler) refresh(g int) {
	if !s.local[g] {
		return
	}
	w, b := g>>6, uint64(1)<<(g&63)
	s.readyHead[w] &^= b
	s.readyTail[w] &^= b
	if s.ready(g, false, nil) {
		s.readyHead[w] |= b
	}
	if s.ready(g, true, nil) {
		s.readyTail[w] |= b
	}
}

// refreshAll recomputes every local interval's readiness.
func (s *Scheduler) refreshAll() {
	for _, g := range s.localIDs {
		s.refresh(int(g))
	}
}

// count adds one to ring's count for epoch e and returns the new count.
func (s *Scheduler) count(ring *[2]epochCount, e int) int {
	c := &ring[e&1]
	if c.epoch != e {
		*c = epochCount{epoch: e}
	}
	c.count++
	return c.count
}

// produce records that interval g produced its flow-f rows of epoch e.
func (s *Scheduler) produce(f, g, e int) {
	i := f*s.n + g
	if int32(e) <= s.latest[i] {
		return // cannot happen: an interval produces its epochs in order
	}
	first := s.latest[i] < 0
	s.latest[i] = int32(e)
	if s.sync {
		if s.count(&s.barrier[f], e) == s.n {
			s.refreshAll()
		}
		return
	}
	if first {
		s.haveAll[f]++
		if !s.allToAll {
			for _, c := range s.consumers(f, g) {
				s.have[f*s.n+int(c)]++
				s.refresh(int(c))
			}
		} else if int(s.haveAll[f]) == s.n {
			s.refreshAll()
		}
	}
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
		if s.local[g] && s.iv[g].epoch <= s.last {
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
		all[g] = s.iv[g].epoch
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
	if id.Interval < 0 || g >= end || s.iv[g].epoch > s.last {
		return Task{}, false
	}
	return s.task(g, s.tailReached(g)), true
}

// Running returns the local tasks started and not yet done, in global interval order (an
// interval's tail task before its head task).
func (s *Scheduler) Running() []Task {
	out := make([]Task, 0, s.inFlight)
	for g := range s.iv {
		if s.iv[g].running {
			out = append(out, s.task(g, true))
		}
		if s.iv[g].hrunning {
			out = append(out, s.task(g, false))
		}
	}
	return out
}

// WeightVersion returns the newest weight version: the one the next epoch start pins.
func (s *Scheduler) WeightVersion() int { return s.version }

// SetWeightVersion records that the parameter server now holds version v (≥ 0). Only with
// Config.ExternalVersions. Versions never go back: a v older than WeightVersion() is ignored, so
// reports may arrive out of order.
func (s *Scheduler) SetWeightVersion(v int) error {
	if !s.external {
		return fmt.Errorf("set weight version %d: %w: the scheduler counts versions (Config.ExternalVersions is off)", v, ErrVersion)
	}
	if v < 0 {
		return fmt.Errorf("set weight version %d: %w: want at least 0", v, ErrVersion)
	}
	if v > s.version {
		s.version = v
		if s.sync {
			s.refreshAll()
		}
	}
	return nil
}

// PinnedVersions returns, ascending and without repeats, the weight versions local intervals
// have pinned for epochs still in progress. The parameter server may drop every other version
// except WeightVersion(), which the next epoch start pins.
func (s *Scheduler) PinnedVersions() []int {
	var out []int
	for g := range s.iv {
		st := &s.iv[g]
		if !s.local[g] {
			continue
		}
		if st.epoch < st.head && st.pin >= 0 && (st.epoch <= s.last || st.running) {
			out = append(out, st.pin)
		}
		if st.hpin >= 0 && (st.head <= s.last || st.hrunning || (st.epoch == st.head && st.running)) {
			out = append(out, st.hpin)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
