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

	pos     []int // tasks done per interval
	running []bool
	started map[Task]bool
	done    map[Task]bool
	// latest[flow][g]: newest epoch g produced, -1 if none. Flow l < L forward, L+l backward.
	latest     [][]int
	produced   map[[2]int]int // (flow, epoch) -> producers done
	wuDone     map[int]int    // epoch -> WUs done
	version    int            // counted version (when the scheduler counts)
	extVersion int            // the version the test last set (ExternalVersions)
	pins       map[[2]int]int // (interval, epoch) -> pinned version
	stopAt     int            // history length when StopAfter was called, -1 if never

	// coverage
	maxAge, gateEdge, blockedByGate int
}

func newOracle(cfg Config) *oracle {
	o := &oracle{cfg: cfg, seq: Sequence(cfg.Layers), index: map[IntervalID]int{},
		started: map[Task]bool{}, done: map[Task]bool{}, produced: map[[2]int]int{},
		wuDone: map[int]int{}, pins: map[[2]int]int{}, stopAt: -1, last: cfg.Epochs - 1}
	if !cfg.Sync {
		o.stale = cfg.Staleness
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
	o.pos = make([]int, n)
	o.running = make([]bool, n)
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

func (o *oracle) epochOf(g int) int { return o.pos[g] / len(o.seq) }

// next returns interval g's next task.
func (o *oracle) next(g int) Task {
	st := o.seq[o.pos[g]%len(o.seq)]
	return Task{Partition: o.ids[g].Partition, Interval: o.ids[g].Interval, Epoch: o.epochOf(g), Layer: st.Layer, Kind: st.Kind}
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
	if o.running[g] || o.next(g) != t {
		return false, "not the interval's next task"
	}
	if t.Epoch > o.last {
		return false, "stopped"
	}
	if t.Kind == KindAV && t.Layer == 0 {
		if t.Epoch > o.minUnf()+o.stale {
			return false, "gate"
		}
		if o.cfg.Sync && t.Epoch > 0 {
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
	if o.cfg.Sync {
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

// readyLocal returns the tasks Ready must return, in its order.
func (o *oracle) readyLocal() []Task {
	var out []Task
	for g, id := range o.ids {
		if !o.local(id.Partition) {
			continue
		}
		if ok, _ := o.depsMet(o.next(g)); ok {
			out = append(out, o.next(g))
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
		if t.Epoch == m+o.stale && o.stale > 0 {
			o.gateEdge++
		}
		o.pins[[2]int{g, t.Epoch}] = version
		if o.cfg.Sync && t.Epoch > 0 {
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
			if o.cfg.Sync && age != 0 {
				return fmt.Errorf("sync: %v reads epoch %d of %v", t, r.Epoch, r.From)
			}
			if age > o.stale+1 {
				return fmt.Errorf("staleness bound broken: %v reads epoch %d of %v (age %d > S+1 = %d)", t, r.Epoch, r.From, age, o.stale+1)
			}
			o.maxAge = max(o.maxAge, age)
		}
		if o.cfg.Sync && o.produced[[2]int{f, t.Epoch}] != o.n() {
			return fmt.Errorf("sync barrier broken: %v starts with %d of %d producers done", t, o.produced[[2]int{f, t.Epoch}], o.n())
		}
	}
	if t.Epoch > o.last && o.stopAt >= 0 {
		return fmt.Errorf("%v starts after StopAfter(%d)", t, o.last)
	}
	o.started[t] = true
	o.running[g] = true
	return nil
}

// finish records t (started, or observed, so never started here) as done.
func (o *oracle) finish(t Task) error {
	g := o.index[t.ID()]
	if o.done[t] {
		return fmt.Errorf("%v done twice", t)
	}
	if o.next(g) != t {
		return fmt.Errorf("%v done out of order; next is %v", t, o.next(g))
	}
	o.done[t] = true
	o.running[g] = false
	o.pos[g]++
	if f := o.producedFlow(t); f >= 0 {
		o.latest[f][g] = max(o.latest[f][g], t.Epoch)
		o.produced[[2]int{f, t.Epoch}]++
	}
	if t.Kind == KindWU {
		o.wuDone[t.Epoch]++
		if !o.cfg.Sync || o.wuDone[t.Epoch] == o.n() {
			o.version++
		}
	}
	return nil
}

// observe records what Observe(t) means: t and every earlier task of its interval are done.
func (o *oracle) observe(t Task) error {
	g := o.index[t.ID()]
	target := t.Epoch*len(o.seq) + stepIndex(t.Kind, t.Layer, o.cfg.Layers)
	for o.pos[g] <= target {
		if err := o.finish(o.next(g)); err != nil {
			return err
		}
	}
	return nil
}

// pinned returns the versions local intervals hold for epochs in progress.
func (o *oracle) pinned() []int {
	var out []int
	for g, id := range o.ids {
		if !o.local(id.Partition) {
			continue
		}
		e := o.epochOf(g)
		if v, ok := o.pins[[2]int{g, e}]; ok && (e <= o.last || o.running[g]) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (o *oracle) finished() bool {
	for g := range o.ids {
		if o.running[g] || o.epochOf(g) <= o.last {
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
		if o.running[g] && o.local(id.Partition) {
			inFlight++
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
		if o.running[g] {
			return fmt.Errorf("%v still running", o.next(g))
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
