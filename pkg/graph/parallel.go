package graph

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelRanges splits [0, n) into contiguous ranges of at least grain items, one per goroutine
// (at most GOMAXPROCS), and calls fn on each.
func parallelRanges(n, grain int, fn func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), (n+grain-1)/max(grain, 1))
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range w {
		lo, hi := n*i/w, n*(i+1)/w
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// parallelChunks calls fn(c) for every c in [0, chunks) on up to GOMAXPROCS goroutines. The
// result must not depend on which goroutine runs which chunk.
func parallelChunks(chunks int, fn func(c int)) {
	w := min(runtime.GOMAXPROCS(0), chunks)
	if w <= 1 {
		for c := range chunks {
			fn(c)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Go(func() {
			for c := int(next.Add(1) - 1); c < chunks; c = int(next.Add(1) - 1) {
				fn(c)
			}
		})
	}
	wg.Wait()
}
