package pipeline

import (
	"errors"
	"fmt"
	"slices"
)

// oracle is an independent model of what the scheduler must do, written from the rules of
// doc.go by task names rather than from the scheduler's internals. It records the true history
// (every start and done, across all partitions) and checks each step against the rules.
type oracle struct {
	cfg    Config
	seq    []Step
	ids    []IntervalID
	index  map[IntervalID]int
	fwdSrc [][]int // GA's sources per interval
	bwdSrc [][]int // gradient sources per interval: the intervals that read it
	stale  int
	last   int
	split  int // index of ∇GA_{L-1} in seq: the tail lane runs seq[split:], the head seq[:split]
	lead   int // epochs the head may run ahead of the tail (Config.TailOverlap)

	// hpos[g] (tpos[g]): head (tail) tasks done per interval, in lane order
	hpos, tpos []int
	// hrun[g] (trun[g]): a head (tail) task of interval g is running
	hrun, trun []bool
	history    [][]Task // tasks done per interval, in order
	started    map[Task]bool
	done       map[Task]bool
	// latest[flow][g]: newest epoch g produced, -1 if none. Flow l < L forward, L+l backward.
	latest     [][]int
	produced   map[[2]int]int // (flow, epoch) -> producers done
	wuDone     map[int]int    // epoch -> WUs done
	version    int            // counted version (when the scheduler counts)
	extVersion int            // the version the test last set (ExternalVersions)
	pins       map[[2]int]int // (interval, epoch) -> pinned version
	stopAt     int            // history length when StopAfter was called, -1 if never

	// coverage
	maxAge, gateEdge int
	overlaps         int // head tasks started while an older epoch's tail was unfinished
}

func newOracle(cfg Config) *oracle {
	o := &oracle{cfg: cfg, seq: Sequence(cfg.Layers), index: map[IntervalID]int{},
		started: map[Task]bool{}, done: map[Task]bool{}, produced: map[[2]int]int{},
		wuDone: map[int]int{}, pins: map[[2]int]int{}, stopAt: -1, last: cfg.Epochs - 1}
	o.stale = cfg.Staleness.Bound()
	o.split = 3*cfg.Layers + 1 // after AV_L
	if cfg.TailOverlap && o.stale > 0 {
		o.lead = 1
	}
	for p, c := range cfg.intervalCounts() {
		for i := 0; i < c; i++ {
			o.index[IntervalID{p, i}] = len(o.ids)
			o.ids = append(o.ids, IntervalID{p, i})
		}
	}
	n := len(o.ids)
	o.fwdSrc = make([][]int, n)
	o.bwdSrc = make([][]int, n)
	for g, id := range o.ids {
		srcs, ok := cfg.Reads[id]
		if !ok {
			for h := 0; h < n; h++ {
				o.fwdSrc[g] = append(o.fwdSrc[g], h)
			}
			continue
		}
		for _, src := range srcs {
			h := o.index[src]
			if !slices.Contains(o.fwdSrc[g], h) {
				o.fwdSrc[g] = append(o.fwdSrc[g], h)
			}
		}
		slices.Sort(o.fwdSrc[g])
	}
	for g := range o.ids {
		for k := range o.ids {
			if slices.Contains(o.fwdSrc[k], g) {
				o.bwdSrc[g] = append(o.bwdSrc[g], k)
			}
		}
	}
	o.hpos, o.tpos = make([]int, n), make([]int, n)
	o.hrun, o.trun = make([]bool, n), make([]bool, n)
	o.history = make([][]Task, n)
	o.latest = make([][]int, 2*cfg.Layers)
	for f := range o.latest {
		o.latest[f] = make([]int, n)
		for g := range o.latest[f] {
			o.latest[f][g] = -1
		}
	}
	return o
}

func (o *oracle) local(p int) bool { return o.cfg.Local == nil || slices.Contains(o.cfg.Local, p) }

func (o *oracle) n() int { return len(o.ids) }

// tailLen is the number of steps of the tail lane.
func (o *oracle) tailLen() int { return len(o.seq) - o.split }

// epochOf returns interval g's lowest unfinished epoch: its tail's.
func (o *oracle) epochOf(g int) int { return o.tpos[g] / o.tailLen() }

// isTail reports whether t runs in the tail lane.
func (o *oracle) isTail(t Task) bool { return stepIndex(t.Kind, t.Layer, o.cfg.Layers) >= o.split }

// headNext and tailNext return interval g's next task in each lane.
func (o *oracle) headNext(g int) Task {
	return o.taskAt(g, o.hpos[g]/o.split, o.hpos[g]%o.split)
}

func (o *oracle) tailNext(g int) Task {
	return o.taskAt(g, o.epochOf(g), o.split+o.tpos[g]%o.tailLen())
}

func (o *oracle) taskAt(g, epoch, si int) Task {
	st := o.seq[si]
	return Task{Partition: o.ids[g].Partition, Interval: o.ids[g].Interval, Epoch: epoch, Layer: st.Layer, Kind: st.Kind}
}

// laneNext returns the next task of t's lane of t's interval.
func (o *oracle) laneNext(t Task) Task {
	if o.isTail(t) {
		return o.tailNext(o.index[t.ID()])
	}
	return o.headNext(o.index[t.ID()])
}

// laneRunning reports whether a task of t's lane of t's interval is running.
func (o *oracle) laneRunning(t Task) bool {
	if o.isTail(t) {
		return o.trun[o.index[t.ID()]]
	}
	return o.hrun[o.index[t.ID()]]
}

func (o *oracle) setRunning(t Task, r bool) {
	if o.isTail(t) {
		o.trun[o.index[t.ID()]] = r
	} else {
		o.hrun[o.index[t.ID()]] = r
	}
}

// headDone reports whether the head part of interval g's epoch e is done.
func (o *oracle) headDone(g, e int) bool { return o.hpos[g] >= (e+1)*o.split }

// next returns interval g's first unfinished task in sequence order: the tail's when the head
// has done its epoch's part.
func (o *oracle) next(g int) Task {
	if e := o.epochOf(g); o.headDone(g, e) {
		return o.tailNext(g)
	}
	return o.headNext(g)
}

// predsDone reports whether the tasks t follows in its interval are done: the one before it in
// its lane and, for the first task of a lane, the other lane's part it waits for.
func (o *oracle) predsDone(t Task) bool {
	g := o.index[t.ID()]
	if o.laneNext(t) != t {
		return false
	}
	if o.isTail(t) {
		return o.headDone(g, t.Epoch)
	}
	if t.Kind == KindAV && t.Layer == 0 {
		return o.epochOf(g) >= t.Epoch-o.lead // the tail has finished epoch t.Epoch-1-lead
	}
	return true
}

func (o *oracle) minUnf() int {
	m := int(^uint(0) >> 1)
	for g := range o.ids {
		m = min(m, o.epochOf(g))
	}
	return m
}

// producedFlow returns the flow a task makes available to other intervals, or -1.
func (o *oracle) producedFlow(t Task) int {
	L := o.cfg.Layers
	switch {
	case t.Kind == KindSC:
		return t.Layer
	case o.cfg.Gradients == PushGradients && t.Kind == KindBackSC:
		return L + t.Layer
	case o.cfg.Gradients == PullGradients && t.Kind == KindAV && t.Layer == L:
		return L + L - 1
	case o.cfg.Gradients == PullGradients && t.Kind == KindBackAV && t.Layer > 0:
		return L + t.Layer - 1
	}
	return -1
}

// readFlow returns the flow a task reads from other intervals and the intervals it reads, or -1.
func (o *oracle) readFlow(t Task) (int, []int) {
	L := o.cfg.Layers
	g := o.index[t.ID()]
	switch {
	case t.Kind == KindGA:
		return t.Layer, o.fwdSrc[g]
	case o.cfg.Gradients == PushGradients && t.Kind == KindBackAV:
		return L + t.Layer, o.bwdSrc[g]
	case o.cfg.Gradients == PullGradients && t.Kind == KindBackGA:
		return L + t.Layer, o.bwdSrc[g]
	}
	return -1, nil
}

func usesWeights(t Task, layers int) bool {
	return (t.Kind == KindAV && t.Layer < layers) || t.Kind == KindBackAV || t.Kind == KindWU
}

// depsMet says whether t may start now, by the rules of doc.go.
func (o *oracle) depsMet(t Task) (bool, string) {
	g := o.index[t.ID()]
	if o.laneRunning(t) || !o.predsDone(t) {
		return false, "not the interval's next task"
	}
	if t.Epoch > o.last {
		return false, "stopped"
	}
	if t.Kind == KindAV && t.Layer == 0 {
		if t.Epoch > o.minUnf()+o.stale {
			return false, "gate"
		}
		if o.drains(t.Epoch) {
			return false, "drain"
		}
		if o.cfg.Staleness.Sync() && t.Epoch > 0 {
			if o.wuDone[t.Epoch-1] != o.n() {
				return false, "sync: previous epoch not finished everywhere"
			}
			if o.cfg.ExternalVersions && o.extVersion <= o.pins[[2]int{g, t.Epoch - 1}] {
				return false, "sync: weights not updated yet"
			}
		}
	}
	f, srcs := o.readFlow(t)
	if f < 0 {
		return true, ""
	}
	if o.cfg.Staleness.Sync() {
		if o.produced[[2]int{f, t.Epoch}] != o.n() {
			return false, "sync barrier"
		}
		return true, ""
	}
	for _, h := range srcs {
		v := o.latest[f][h]
		if v < 0 || t.Epoch-v > o.stale+1 {
			return false, "source without fresh enough rows"
		}
	}
	return true, ""
}

// drains reports whether epoch e may not start yet because the pipeline drains before it.
func (o *oracle) drains(e int) bool {
	d := o.cfg.DrainEvery
	return !o.cfg.Staleness.Sync() && d > 0 && e%d == 0 && e > o.minUnf()
}

// readyLocal returns the tasks Ready must return, in its order.
func (o *oracle) readyLocal() []Task {
	var out []Task
	for g, id := range o.ids {
		if !o.local(id.Partition) {
			continue
		}
		for _, t := range []Task{o.tailNext(g), o.headNext(g)} {
			if ok, _ := o.depsMet(t); ok {
				out = append(out, t)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Task) int { return a.Epoch - b.Epoch })
	return out
}

// start checks what the scheduler returned for t against the rules and records it. version is
// the weight version AV_0 should pin (the oracle's count, or the caller's in external mode).
func (o *oracle) start(t Task, got Started, version int) error {
	g := o.index[t.ID()]
	if o.started[t] {
		return fmt.Errorf("%v started twice", t)
	}
	if ok, why := o.depsMet(t); !ok {
		return fmt.Errorf("%v started with unmet dependencies: %s", t, why)
	}
	if t.Kind == KindAV && t.Layer == 0 {
		m := o.minUnf()
		if t.Epoch > m+o.stale {
			return fmt.Errorf("epoch gate broken: %v starts with lowest unfinished %d, S=%d", t, m, o.stale)
		}
		if o.drains(t.Epoch) {
			return fmt.Errorf("drain broken: %v starts with lowest unfinished %d, draining every %d epochs", t, m, o.cfg.DrainEvery)
		}
		if t.Epoch == m+o.stale && o.stale > 0 {
			o.gateEdge++
		}
		o.pins[[2]int{g, t.Epoch}] = version
		if o.cfg.Staleness.Sync() && t.Epoch > 0 {
			if prev := o.pins[[2]int{g, t.Epoch - 1}]; version <= prev {
				return fmt.Errorf("sync: %v pins version %d, not newer than last epoch's %d", t, version, prev)
			}
		}
	}
	if got.Task != t {
		return fmt.Errorf("Started.Task %v for %v", got.Task, t)
	}
	if usesWeights(t, o.cfg.Layers) {
		pin, ok := o.pins[[2]int{g, t.Epoch}]
		if !ok {
			return fmt.Errorf("%v runs without a pinned version", t)
		}
		if got.Weights != pin {
			return fmt.Errorf("weight stashing broken: %v uses version %d, its AV_0 pinned %d", t, got.Weights, pin)
		}
	} else if got.Weights != NoWeights {
		return fmt.Errorf("%v gets weights %d, uses none", t, got.Weights)
	}
	f, srcs := o.readFlow(t)
	if f < 0 {
		if got.Reads != nil {
			return fmt.Errorf("%v reads %v, reads nothing", t, got.Reads)
		}
	} else {
		if len(got.Reads) != len(srcs) {
			return fmt.Errorf("%v reads %d intervals, want %d", t, len(got.Reads), len(srcs))
		}
		for i, h := range srcs {
			r := got.Reads[i]
			if r.From != o.ids[h] {
				return fmt.Errorf("%v read %d is from %v, want %v", t, i, r.From, o.ids[h])
			}
			if r.Epoch < 0 || r.Epoch > o.latest[f][h] {
				return fmt.Errorf("%v reads epoch %d of %v, which has produced only up to %d", t, r.Epoch, r.From, o.latest[f][h])
			}
			if r.Epoch != o.latest[f][h] {
				return fmt.Errorf("%v reads epoch %d of %v, not the freshest %d", t, r.Epoch, r.From, o.latest[f][h])
			}
			age := t.Epoch - r.Epoch
			if o.cfg.Staleness.Sync() && age != 0 {
				return fmt.Errorf("sync: %v reads epoch %d of %v", t, r.Epoch, r.From)
			}
			if age > o.stale+1 {
				return fmt.Errorf("staleness bound broken: %v reads epoch %d of %v (age %d > S+1 = %d)", t, r.Epoch, r.From, age, o.stale+1)
			}
			o.maxAge = max(o.maxAge, age)
		}
		if o.cfg.Staleness.Sync() && o.produced[[2]int{f, t.Epoch}] != o.n() {
			return fmt.Errorf("sync barrier broken: %v starts with %d of %d producers done", t, o.produced[[2]int{f, t.Epoch}], o.n())
		}
	}
	if t.Epoch > o.last && o.stopAt >= 0 {
		return fmt.Errorf("%v starts after StopAfter(%d)", t, o.last)
	}
	if !o.isTail(t) && o.epochOf(g) < t.Epoch {
		o.overlaps++
	}
	o.started[t] = true
	o.setRunning(t, true)
	return nil
}

// finish records t (started, or observed, so never started here) as done.
func (o *oracle) finish(t Task) error {
	g := o.index[t.ID()]
	if o.done[t] {
		return fmt.Errorf("%v done twice", t)
	}
	if !o.predsDone(t) {
		return fmt.Errorf("%v done out of order; its lane's next is %v", t, o.laneNext(t))
	}
	o.done[t] = true
	o.setRunning(t, false)
	o.history[g] = append(o.history[g], t)
	if o.isTail(t) {
		o.tpos[g]++
	} else {
		o.hpos[g]++
	}
	if f := o.producedFlow(t); f >= 0 {
		o.latest[f][g] = max(o.latest[f][g], t.Epoch)
		o.produced[[2]int{f, t.Epoch}]++
	}
	if t.Kind == KindWU {
		o.wuDone[t.Epoch]++
		if !o.cfg.Staleness.Sync() || o.wuDone[t.Epoch] == o.n() {
			o.version++
		}
	}
	return nil
}

// observe records what Observe(t) means: t and every task it follows in its interval are done.
func (o *oracle) observe(t Task) error {
	if o.done[t] {
		return nil
	}
	g := o.index[t.ID()]
	for {
		next := o.laneNext(t)
		// What next waits for in the other lane.
		if o.isTail(next) && !o.headDone(g, next.Epoch) {
			if err := o.observe(o.taskAt(g, next.Epoch, o.split-1)); err != nil {
				return err
			}
		}
		if next.Kind == KindAV && next.Layer == 0 && o.epochOf(g) < next.Epoch-o.lead {
			if err := o.observe(o.taskAt(g, next.Epoch-1-o.lead, len(o.seq)-1)); err != nil {
				return err
			}
		}
		if err := o.finish(next); err != nil {
			return err
		}
		if next == t {
			return nil
		}
	}
}

// pinned returns the versions local intervals hold for epochs in progress.
func (o *oracle) pinned() []int {
	var out []int
	for g, id := range o.ids {
		if !o.local(id.Partition) {
			continue
		}
		for e := o.epochOf(g); e <= o.hpos[g]/o.split; e++ {
			running := (o.trun[g] && o.tailNext(g).Epoch == e) || (o.hrun[g] && o.headNext(g).Epoch == e)
			if v, ok := o.pins[[2]int{g, e}]; ok && (e <= o.last || running) {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (o *oracle) finished() bool {
	for g := range o.ids {
		if o.hrun[g] || o.trun[g] || o.epochOf(g) <= o.last {
			return false
		}
	}
	return true
}

// check compares the scheduler's whole observable state with the oracle's.
func (o *oracle) check(s *Scheduler) error {
	want := o.readyLocal()
	got := s.Ready()
	if !slices.Equal(got, want) {
		return fmt.Errorf("Ready() = %v, want %v", got, want)
	}
	if again := s.Ready(); !slices.Equal(again, got) {
		return fmt.Errorf("Ready() not deterministic: %v then %v", got, again)
	}
	for _, t := range got {
		if ok, why := o.depsMet(t); !ok {
			return fmt.Errorf("Ready returned %v with unmet dependencies: %s", t, why)
		}
	}
	if s.LowestUnfinished() != o.minUnf() {
		return fmt.Errorf("LowestUnfinished() = %d, want %d", s.LowestUnfinished(), o.minUnf())
	}
	prog := s.Progress()
	for g, id := range o.ids {
		if prog[id.Partition][id.Interval] != o.epochOf(g) {
			return fmt.Errorf("Progress()[%v] = %d, want %d", id, prog[id.Partition][id.Interval], o.epochOf(g))
		}
	}
	if !o.cfg.ExternalVersions && s.WeightVersion() != o.version {
		return fmt.Errorf("WeightVersion() = %d, want %d", s.WeightVersion(), o.version)
	}
	if p, w := s.PinnedVersions(), o.pinned(); !slices.Equal(p, w) {
		return fmt.Errorf("PinnedVersions() = %v, want %v", p, w)
	}
	inFlight := 0
	for g, id := range o.ids {
		if o.local(id.Partition) {
			inFlight += btoi(o.hrun[g]) + btoi(o.trun[g])
		}
	}
	if s.InFlight() != inFlight {
		return fmt.Errorf("InFlight() = %d, want %d", s.InFlight(), inFlight)
	}
	if s.Finished() != o.finished() {
		return fmt.Errorf("Finished() = %v, want %v", s.Finished(), o.finished())
	}
	return nil
}

// checkComplete checks at the end of a run that every task of every epoch up to the last ran
// exactly once, and only tasks of started epochs ran beyond it.
func (o *oracle) checkComplete() error {
	for g, id := range o.ids {
		for e := 0; e <= o.last; e++ {
			for _, st := range o.seq {
				t := Task{Partition: id.Partition, Interval: id.Interval, Epoch: e, Layer: st.Layer, Kind: st.Kind}
				if !o.done[t] {
					return fmt.Errorf("%v never ran", t)
				}
				if o.local(id.Partition) && !o.started[t] {
					return fmt.Errorf("%v done but never started", t)
				}
			}
		}
		if o.hrun[g] || o.trun[g] {
			return fmt.Errorf("a task of %v still running", id)
		}
	}
	return nil
}

// mustErr checks that err wraps target.
func mustErr(err, target error, what string) error {
	if !errors.Is(err, target) {
		return fmt.Errorf("%s: got error %v, want %v", what, err, target)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
