package tensor

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestParallelForCoversOnce(t *testing.T) {
	for _, th := range []int{1, 2, 5} {
		withThreads(th, func() {
			for _, n := range []int{0, 1, 2, 7, 100, 1000, 12345} {
				for _, grain := range []int{0, 1, 3, 64, 5000} {
					hits := make([]int32, n)
					var calls atomic.Int32
					var small atomic.Int32
					ParallelFor(n, grain, func(lo, hi int) {
						calls.Add(1)
						if hi-lo < grain && !(lo == 0 && hi == n) {
							small.Add(1)
						}
						for i := lo; i < hi; i++ {
							atomic.AddInt32(&hits[i], 1)
						}
					})
					for i, h := range hits {
						if h != 1 {
							t.Fatalf("threads %d n %d grain %d: index %d run %d times", th, n, grain, i, h)
						}
					}
					if small.Load() != 0 {
						t.Errorf("threads %d n %d grain %d: %d chunks under the grain", th, n, grain, small.Load())
					}
					if n > 0 && n < 2*max(grain, 1) && calls.Load() != 1 {
						t.Errorf("n %d grain %d: %d chunks, want 1", n, grain, calls.Load())
					}
				}
			}
		})
	}
}

func TestParallelForNestedAndConcurrent(t *testing.T) {
	withThreads(2, func() {
		var total atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for rep := 0; rep < 50; rep++ {
					ParallelFor(64, 1, func(lo, hi int) {
						for i := lo; i < hi; i++ {
							ParallelFor(16, 1, func(lo2, hi2 int) { total.Add(int64(hi2 - lo2)) })
						}
					})
				}
			}()
		}
		wg.Wait()
		if want := int64(8 * 50 * 64 * 16); total.Load() != want {
			t.Fatalf("total %d, want %d", total.Load(), want)
		}
	})
}

func TestSetThreads(t *testing.T) {
	old := Threads()
	defer SetThreads(old)
	SetThreads(3)
	if Threads() != 3 {
		t.Fatalf("Threads() = %d", Threads())
	}
	SetThreads(0)
	if Threads() != runtime.GOMAXPROCS(0) {
		t.Fatalf("Threads() = %d, want GOMAXPROCS", Threads())
	}
}

func noop(lo, hi int) {}

func TestParallelForNoAlloc(t *testing.T) {
	withThreads(2, func() {
		ParallelFor(1000, 10, noop)
		if n := testing.AllocsPerRun(100, func() { ParallelFor(1000, 10, noop) }); n != 0 {
			t.Errorf("ParallelFor allocates %v times a call", n)
		}
	})
}

func BenchmarkParallelForOverhead(b *testing.B) {
	for _, th := range []int{1, 2} {
		withThreads(th, func() {
			b.Run(map[int]string{1: "threads=1", 2: "threads=2"}[th], func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					ParallelFor(1000, 10, noop)
				}
			})
		})
	}
}
