package remote

import (
	"slices"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
)

// kind is what the latency statistics are kept by: a task and its layer.
type kind struct {
	op    dispatch.Op
	layer int
}

// window holds the last durations of one kind of task.
type window struct {
	d    [windowSize]time.Duration
	n    int // samples seen
	base time.Duration
}

const (
	windowSize = 32
	minSamples = 5 // before which a kind has no median
)

func (w *window) add(d time.Duration) {
	w.d[w.n%windowSize] = d
	w.n++
}

// median returns the median of the window; ok is false with fewer than minSamples.
func (w *window) median() (time.Duration, bool) {
	if w.n < minSamples {
		return 0, false
	}
	s := slices.Clone(w.d[:min(w.n, windowSize)])
	slices.Sort(s)
	return s[len(s)/2], true
}

// tuner adapts the number of calls in flight, between 1 and max, to the queue of waiting
// tasks and the observed latency, as TCP adapts its window: one more call while tasks wait
// and every kind's median latency stays within congested× its lowest median seen, one fewer
// when a median rises above it, a quarter fewer when the service throttles. After a change
// it waits for limit completions before the next decrease, so one burst is counted once.
// A fixed tuner keeps its limit and only keeps the latency statistics. It is pure: the
// backend feeds it completions under its lock.
type tuner struct {
	fixed      bool
	max, limit int
	kinds      map[kind]*window
	cooldown   int // completions before the next decrease
}

// congested is the rise of a median over its lowest value that counts as congestion.
const congested = 2

func newTuner(initial, ceiling int, fixed bool) *tuner {
	return &tuner{fixed: fixed, max: ceiling, limit: min(max(initial, 1), ceiling), kinds: map[kind]*window{}}
}

// done records a successful call of k that took d while queued tasks waited for a slot.
func (t *tuner) done(k kind, d time.Duration, queued int) {
	w := t.kinds[k]
	if w == nil {
		w = &window{}
		t.kinds[k] = w
	}
	w.add(d)
	if t.cooldown > 0 {
		t.cooldown--
	}
	m, ok := w.median()
	if ok && (w.base == 0 || m < w.base) {
		w.base = m
	}
	switch {
	case t.fixed:
	case ok && m > congested*w.base:
		if t.cooldown == 0 && t.limit > 1 {
			t.limit--
			t.cooldown = t.limit
		}
	case queued > 0 && t.limit < t.max:
		t.limit++
	}
}

// throttled records a call the service refused for throttling.
func (t *tuner) throttled() {
	if t.fixed || t.cooldown > 0 {
		return
	}
	t.limit = max(1, t.limit*3/4)
	t.cooldown = t.limit
}

// threshold returns after how long a call of k counts as a straggler: factor × its median,
// at least floor; ok is false while k has too few samples or relaunch is off (factor ≤ 0).
func (t *tuner) threshold(k kind, factor float64, floor time.Duration) (time.Duration, bool) {
	w := t.kinds[k]
	if w == nil || factor <= 0 {
		return 0, false
	}
	m, ok := w.median()
	return max(time.Duration(factor*float64(m)), floor), ok
}
