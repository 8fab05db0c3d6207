package pipeline

import (
	"fmt"
	"math/bits"
	"slices"
)

// bitset is a set of global interval indices.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(g int)   { b[g>>6] |= 1 << (g & 63) }
func (b bitset) clear(g int) { b[g>>6] &^= 1 << (g & 63) }

// count returns the number of members.
func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// Wait says why an interval's next task may not start yet.
type Wait uint8

// The reasons Blocked gives.
const (
	WaitNone    Wait = iota // a task of the interval is ready or running, or none is left
	WaitGate                // the epoch gate: the interval is S epochs ahead of the slowest, or waits for a drain
	WaitVersion             // synchronous mode: the previous epoch's weights are not updated yet
	WaitRows                // rows it reads are not produced yet (the barrier, or peers' rows)
	waitLane                // the interval's other lane runs first (not a wait of the interval)
)

// ready reports whether interval g's next task in lane sd may start; reason, when asked, says
// why not.
func (s *Scheduler) ready(g int, sd side, reason *string) bool {
	return s.blocked(g, sd, reason) == WaitNone
}

// blocked returns why interval g's next task in lane sd may not start (WaitNone: it may, or
// the run stops before it); reason, when asked and it may not, says why in words.
func (s *Scheduler) blocked(g int, sd side, reason *string) Wait {
	st := &s.iv[g]
	why := func(w Wait, format string, args ...any) Wait {
		if reason != nil {
			*reason = fmt.Sprintf(format, args...)
		}
		return w
	}
	ln := &st.lanes[sd]
	e, si := ln.epoch, ln.step
	switch {
	case ln.running:
		return why(waitLane, "another task of the interval's %v is running", sd)
	case e > s.last:
		return why(waitLane, "the run stops after epoch %d", s.last)
	case sd == tail && !s.tailReached(g):
		return why(waitLane, "the interval's %v has not run yet", s.task(g, head))
	case sd == head && si == s.split:
		return why(waitLane, "the interval's epoch %d has not finished (its next task is %v)", st.lanes[tail].epoch, s.task(g, tail))
	}
	if sd == head && si == 0 {
		if e > s.minUnf+s.stale {
			return why(WaitGate, "epoch gate: lowest unfinished epoch is %d, staleness %d", s.minUnf, s.stale)
		}
		if s.drain > 0 && e%s.drain == 0 && e > s.minUnf {
			return why(WaitGate, "drain: epoch %d waits until every interval has finished epoch %d (lowest unfinished epoch is %d)", e, e-1, s.minUnf)
		}
		if s.sync && st.prevPin >= 0 && s.version <= st.prevPin {
			return why(WaitVersion, "weights of epoch %d not updated yet (version %d)", e-1, s.version)
		}
	}
	f := s.steps[si].consumes
	if f < 0 {
		return WaitNone
	}
	if s.sync {
		got := s.fl.barrierAt(f, e)
		if got == s.n {
			return WaitNone
		}
		return why(WaitRows, "barrier: %d of %d intervals have produced epoch %d's rows", got, s.n, e)
	}
	if s.fl.anyFromAll(f, g) {
		return WaitNone
	}
	return why(WaitRows, "a source interval has produced no rows yet")
}

// Blocked says why no task of local interval i of partition p runs or is ready: the reason of
// its lane that waits for something other than its other lane (the backward pass first, which
// is of the older epoch). It returns WaitNone when a task of it runs or is ready, when it has
// no task left, or for an interval that is not local or does not exist.
func (s *Scheduler) Blocked(p, i int) Wait {
	g, _, err := s.locate(Task{Partition: p, Interval: i, Kind: KindWU})
	if err != nil || !s.local[g] {
		return WaitNone
	}
	w := WaitNone
	for _, sd := range [2]side{tail, head} {
		switch b := s.blocked(g, sd, nil); {
		case b == WaitNone:
			return WaitNone
		case b == waitLane:
			if s.iv[g].lanes[sd].running {
				return WaitNone
			}
		case w == WaitNone:
			w = b
		}
	}
	return w
}

// refresh recomputes whether interval g's next tasks are ready, if g is local.
func (s *Scheduler) refresh(g int) {
	if !s.local[g] {
		return
	}
	for sd := range s.readySet {
		if s.ready(g, side(sd), nil) {
			s.readySet[sd].set(g)
		} else {
			s.readySet[sd].clear(g)
		}
	}
}

// refreshAll recomputes every local interval's readiness.
func (s *Scheduler) refreshAll() {
	for _, g := range s.localIDs {
		s.refresh(int(g))
	}
}

// Ready returns the tasks of local intervals whose dependencies are met and that are not
// started, at most one per interval (two, of different epochs, with Config.TailOverlap), ordered
// by epoch, then partition, then interval. A graph server uses AppendReady.
func (s *Scheduler) Ready() []Task {
	n := s.readySet[head].count() + s.readySet[tail].count()
	if n == 0 {
		return nil
	}
	return s.AppendReady(make([]Task, 0, n))
}

// AppendReady appends what Ready returns to dst and returns the extended slice.
func (s *Scheduler) AppendReady(dst []Task) []Task {
	start := len(dst)
	lo, hi := int(^uint(0)>>1), -1
	add := func(g int, sd side) {
		t := s.task(g, sd)
		lo, hi = min(lo, t.Epoch), max(hi, t.Epoch)
		dst = append(dst, t)
	}
	heads, tails := s.readySet[head], s.readySet[tail]
	for w := range heads {
		word := heads[w] | tails[w]
		for word != 0 {
			b := word & -word
			g := w<<6 | bits.TrailingZeros64(word)
			word &^= b
			// A tail task is of an older epoch than a head task of the same interval.
			if tails[w]&b != 0 {
				add(g, tail)
			}
			if heads[w]&b != 0 {
				add(g, head)
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
