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

// ready reports whether interval g's next task in lane sd may start; reason, when asked, says
// why not.
func (s *Scheduler) ready(g int, sd side, reason *string) bool {
	st := &s.iv[g]
	why := func(format string, args ...any) bool {
		if reason != nil {
			*reason = fmt.Sprintf(format, args...)
		}
		return false
	}
	ln := &st.lanes[sd]
	e, si := ln.epoch, ln.step
	switch {
	case ln.running:
		return why("another task of the interval's %v is running", sd)
	case e > s.last:
		return why("the run stops after epoch %d", s.last)
	case sd == tail && !s.tailReached(g):
		return why("the interval's %v has not run yet", s.task(g, head))
	case sd == head && si == s.split:
		return why("the interval's epoch %d has not finished (its next task is %v)", st.lanes[tail].epoch, s.task(g, tail))
	}
	if sd == head && si == 0 {
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
		got := s.fl.barrierAt(f, e)
		if got == s.n {
			return true
		}
		return why("barrier: %d of %d intervals have produced epoch %d's rows", got, s.n, e)
	}
	if s.fl.anyFromAll(f, g) {
		return true
	}
	return why("a source interval has produced no rows yet")
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
