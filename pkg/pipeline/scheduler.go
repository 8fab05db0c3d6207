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
	offset   []int    // global index of each partition's interval 0
	local    []bool   // per global interval
	localIDs []int32  // global indices of local intervals, ascending
	scratch  []Task   // AppendReady's sort buffer
	readySet []uint64 // bit g: local interval g's next task is ready (kept up to date by refresh)
	steps    []step

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

type ivState struct {
	epoch   int // lowest unfinished epoch
	step    int // index in Sequence of the next task
	running bool
	pin     int // weight version pinned in this epoch, -1 before its AV_0
	prevPin int // the version the previous epoch pinned, -1 if none
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
		s.iv[g] = ivState{epoch: cfg.FirstEpoch, pin: -1, prevPin: -1}
	}
	s.minUnf = cfg.FirstEpoch
	if cfg.Sync {
		s.version = cfg.FirstEpoch
	}
	s.atMin = n
	s.readySet = make([]uint64, (n+63)/64)
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

// cmpPos compares the position (epoch, si) with interval g's next task.
func (s *Scheduler) cmpPos(g, epoch, si int) int {
	st := &s.iv[g]
	switch {
	case epoch != st.epoch:
		return epoch - st.epoch
	default:
		return si - st.step
	}
}

func (s *Scheduler) task(g int) Task {
	st := &s.iv[g]
	sp := &s.steps[st.step]
	return Task{Partition: s.ids[g].Partition, Interval: s.ids[g].Interval, Epoch: st.epoch, Layer: sp.layer, Kind: sp.kind}
}

// ready reports whether interval g's next task may start; reason, when asked, says why not.
func (s *Scheduler) ready(g int, reason *string) bool {
	st := &s.iv[g]
	if st.running || st.epoch > s.last {
		if reason != nil {
			if st.running {
				*reason = "another task of the interval is running"
			} else {
				*reason = fmt.Sprintf("the run stops after epoch %d", s.last)
			}
		}
		return false
	}
	if st.step == 0 {
		if st.epoch > s.minUnf+s.stale {
			if reason != nil {
				*reason = fmt.Sprintf("epoch gate: lowest unfinished epoch is %d, staleness %d", s.minUnf, s.stale)
			}
			return false
		}
		if s.sync && st.prevPin >= 0 && s.version <= st.prevPin {
			if reason != nil {
				*reason = fmt.Sprintf("weights of epoch %d not updated yet (version %d)", st.epoch-1, s.version)
			}
			return false
		}
	}
	f := s.steps[st.step].consumes
	if f < 0 {
		return true
	}
	if s.sync {
		b := s.barrier[f][st.epoch&1]
		if b.epoch == st.epoch && b.count == s.n {
			return true
		}
		if reason != nil {
			got := 0
			if b.epoch == st.epoch {
				got = b.count
			}
			*reason = fmt.Sprintf("barrier: %d of %d intervals have produced epoch %d's rows", got, s.n, st.epoch)
		}
		return false
	}
	if s.allToAll {
		if int(s.haveAll[f]) == s.n {
			return true
		}
	} else if int(s.have[f*s.n+g]) == len(s.sources(f, g)) {
		return true
	}
	if reason != nil {
		*reason = "a source interval has produced no rows yet"
	}
	return false
}

// Ready returns the tasks of local intervals whose dependencies are met and that are not
// started, at most one per interval, ordered by epoch, then partition, then interval.
func (s *Scheduler) Ready() []Task {
	n := 0
	for _, word := range s.readySet {
		n += bits.OnesCount64(word)
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
	for w, word := range s.readySet {
		for word != 0 {
			g := w<<6 | bits.TrailingZeros64(word)
			word &= word - 1
			t := s.task(g)
			lo, hi = min(lo, t.Epoch), max(hi, t.Epoch)
			dst = append(dst, t)
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
	switch c := s.cmpPos(g, t.Epoch, si); {
	case c < 0:
		return Started{}, fmt.Errorf("start %v: %w", t, ErrAlreadyDone)
	case c == 0 && st.running:
		return Started{}, fmt.Errorf("start %v: %w", t, ErrAlreadyStarted)
	case c > 0:
		return Started{}, fmt.Errorf("start %v: %w: the interval's next task is %v", t, ErrNotReady, s.task(g))
	}
	var reason string
	if !s.ready(g, &reason) {
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
		st.pin = s.version
	}
	if sp.weights {
		res.Weights = st.pin
	}
	st.running = true
	s.inFlight++
	s.readySet[g>>6] &^= 1 << (g & 63)
	return res, nil
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
	switch c := s.cmpPos(g, t.Epoch, si); {
	case c < 0:
		return fmt.Errorf("done %v: %w", t, ErrAlreadyDone)
	case c > 0 || !s.iv[g].running:
		return fmt.Errorf("done %v: %w", t, ErrNotStarted)
	}
	s.iv[g].running = false
	s.inFlight--
	s.complete(g)
	return nil
}

// Observe records that a remote partition's task t, and every task before it in its interval's
// sequence, is done: the caller has received its rows or heard of its progress. Observing a
// task already known to be done does nothing, so reports may arrive late or out of order.
func (s *Scheduler) Observe(t Task) error {
	g, si, err := s.locate(t)
	if err != nil {
		return fmt.Errorf("observe %w", err)
	}
	if s.local[g] {
		return fmt.Errorf("observe %v: %w", t, ErrLocal)
	}
	for s.cmpPos(g, t.Epoch, si) >= 0 {
		s.complete(g)
	}
	return nil
}

// complete finishes interval g's next task.
func (s *Scheduler) complete(g int) {
	st := &s.iv[g]
	sp := &s.steps[st.step]
	e := st.epoch
	if f := sp.produces; f >= 0 {
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
	st.step = 0
	st.epoch++
	st.prevPin, st.pin = st.pin, -1
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

// refresh recomputes whether interval g's next task is ready, if g is local.
func (s *Scheduler) refresh(g int) {
	if !s.local[g] {
		return
	}
	if s.ready(g, nil) {
		s.readySet[g>>6] |= 1 << (g & 63)
	} else {
		s.readySet[g>>6] &^= 1 << (g & 63)
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

// Next returns interval id's next task, whether or not it is ready or running; false when the
// interval has finished LastEpoch or does not exist.
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
	return s.task(g), true
}

// Running returns the local tasks started and not yet done, in global interval order.
func (s *Scheduler) Running() []Task {
	out := make([]Task, 0, s.inFlight)
	for g := range s.iv {
		if s.iv[g].running {
			out = append(out, s.task(g))
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
		if s.local[g] && st.pin >= 0 && (st.epoch <= s.last || st.running) {
			out = append(out, st.pin)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
