package pipeline

import (
	"fmt"
	"slices"
)

// pinOf returns the weight version of interval g's epoch in lane sd: the tail's own pin while
// the head is an epoch ahead, else the head's.
func (s *Scheduler) pinOf(g int, sd side) int {
	h, t := &s.iv[g].lanes[head], &s.iv[g].lanes[tail]
	if sd == tail && t.epoch < h.epoch {
		return t.pin
	}
	return h.pin
}

// versionAfterWU moves the weight version after an interval's WU of epoch e, unless the caller
// counts versions (ExternalVersions): in asynchronous mode every WU makes one, in synchronous
// mode the last WU of the epoch does. It reports whether every local interval's readiness may
// have changed (a synchronous epoch start waits for the version).
func (s *Scheduler) versionAfterWU(e int) bool {
	switch {
	case s.external:
		return false
	case !s.sync:
		s.version++
		return false
	case countEpoch(&s.wu, e) == s.n:
		s.version++
		return true
	}
	return false
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
		if !s.local[g] {
			continue
		}
		h, t := &s.iv[g].lanes[head], &s.iv[g].lanes[tail]
		if t.epoch < h.epoch && t.pin >= 0 && (t.epoch <= s.last || t.running) {
			out = append(out, t.pin)
		}
		if h.pin >= 0 && (h.epoch <= s.last || h.running || (t.epoch == h.epoch && t.running)) {
			out = append(out, h.pin)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
