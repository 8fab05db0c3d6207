package tensor

import (
	"runtime"
	"sync/atomic"
)

// The kernel pool. A call splits its index space into chunks and publishes a task; the calling
// goroutine works on the task itself and hands it to at most Threads()-1 helpers, but only to
// helpers that are idle at that moment (a non-blocking send on an unbuffered channel succeeds only
// when a worker is parked on it). Chunks are claimed with an atomic counter, so a slow or busy
// thread never holds the others up, and concurrent or nested calls cannot deadlock: in the worst
// case the caller runs every chunk itself.

// maxPartials bounds the chunk count of reductions, which keep one partial sum per chunk.
const maxPartials = 256

// task is one parallel call. It is pooled and carries the arguments of the internal kernels so that
// publishing it does not allocate a closure.
type task struct {
	// chunking
	n, grain, chunks int
	rowPtr           []int64 // when non-nil, chunks are balanced by RowPtr[i]+i over rows [base, base+n)
	base             int
	next             atomic.Int64 // next chunk to claim
	left             atomic.Int64 // chunks not yet finished
	helpers          atomic.Int32 // helpers still holding the task
	done             chan struct{}

	// body: exactly one of run and fn is set.
	run func(t *task, c, lo, hi int)
	fn  func(lo, hi int)

	// arguments of the internal kernels
	d0, d1, d2 *Dense
	s0, s1     *CSR
	f0         float32
	u0         uint64
	i0, i1     int
	ix0, ix1   []int32
	vec        []float32
	gemm       *gemmArgs
	part       []float32
	partial    [maxPartials]float64
}

type pool struct {
	work    chan *task // unbuffered: a send succeeds only to a parked worker
	free    chan *task // recycled tasks
	threads atomic.Int32
	started atomic.Int32 // helper goroutines started so far
}

var kpool = newPool()

func newPool() *pool {
	p := &pool{work: make(chan *task), free: make(chan *task, 64)}
	p.threads.Store(int32(runtime.GOMAXPROCS(0)))
	return p
}

// SetThreads sets the number of threads the kernels use, the caller included; n <= 0 means
// GOMAXPROCS.
func SetThreads(n int) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	kpool.threads.Store(int32(n))
	setBLASThreads(n)
}

// Threads returns the number of threads the kernels use.
func Threads() int { return int(kpool.threads.Load()) }

func (p *pool) ensureHelpers(k int) {
	for {
		s := p.started.Load()
		if int(s) >= k {
			return
		}
		if p.started.CompareAndSwap(s, s+1) {
			go p.worker()
		}
	}
}

func (p *pool) worker() {
	for t := range p.work {
		t.work()
		if t.helpers.Add(-1) == 0 {
			t.done <- struct{}{}
		}
	}
}

func (p *pool) get() *task {
	select {
	case t := <-p.free:
		return t
	default:
		return &task{done: make(chan struct{}, 1)}
	}
}

func (p *pool) put(t *task) {
	t.rowPtr, t.run, t.fn = nil, nil, nil
	t.d0, t.d1, t.d2, t.s0, t.s1 = nil, nil, nil, nil, nil
	t.ix0, t.ix1 = nil, nil
	t.gemm, t.part, t.vec = nil, nil, nil
	select {
	case p.free <- t:
	default:
	}
}

// bounds returns the index range of chunk c.
func (t *task) bounds(c int) (lo, hi int) {
	if t.rowPtr == nil {
		// Even split; every chunk but possibly the last holds at least grain items.
		lo = int(int64(c) * int64(t.n) / int64(t.chunks))
		hi = int(int64(c+1) * int64(t.n) / int64(t.chunks))
		return lo, hi
	}
	return t.costSplit(c), t.costSplit(c + 1)
}

// costSplit returns the first row r of [0, n] whose cost RowPtr[base+r]-RowPtr[base]+r reaches
// c/chunks of the total, so that chunks carry equal numbers of nonzeros plus rows.
func (t *task) costSplit(c int) int {
	if c <= 0 {
		return 0
	}
	if c >= t.chunks {
		return t.n
	}
	rp := t.rowPtr[t.base : t.base+t.n+1]
	first := rp[0]
	total := rp[t.n] - first + int64(t.n)
	target := int64(c) * total / int64(t.chunks)
	lo, hi := 0, t.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if rp[mid]-first+int64(mid) < target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// work claims and runs chunks until none are left.
func (t *task) work() {
	for {
		c := int(t.next.Add(1) - 1)
		if c >= t.chunks {
			return
		}
		lo, hi := t.bounds(c)
		if lo < hi {
			if t.fn != nil {
				t.fn(lo, hi)
			} else {
				t.run(t, c, lo, hi)
			}
		}
		t.left.Add(-1)
	}
}

// chunkCount picks how many chunks to cut n items into: at least grain items each, and up to
// perThread chunks per thread so that dynamic claiming can even out uneven work.
func chunkCount(n, grain, perThread, limit int) int {
	if grain < 1 {
		grain = 1
	}
	c := n / grain
	if m := Threads() * perThread; c > m {
		c = m
	}
	if c > limit {
		c = limit
	}
	if c < 1 {
		c = 1
	}
	return c
}

// exec runs t over its chunks, on the pool when there is more than one chunk, and recycles it.
func (p *pool) exec(t *task) {
	p.exec0(t)
	p.put(t)
}

// exec0 is exec without recycling t: the caller reads its partial results and then puts it back.
func (p *pool) exec0(t *task) {
	t.next.Store(0)
	t.left.Store(int64(t.chunks))
	if t.chunks == 1 {
		t.work()
		return
	}
	want := Threads() - 1
	if want > t.chunks-1 {
		want = t.chunks - 1
	}
	sent := int32(0)
	if want > 0 {
		p.ensureHelpers(want)
		t.helpers.Store(1 << 30) // hold the count up while handing out
		for i := 0; i < want; i++ {
			select {
			case p.work <- t:
				sent++
			default:
			}
		}
	}
	t.work()
	if sent > 0 {
		// Release the hold: the helpers handed the task decrement the count themselves.
		if t.helpers.Add(sent-(1<<30)) != 0 {
			<-t.done
		}
	}
}

// ParallelFor calls fn on contiguous chunks of [0, n) of at least grain items each, spread over
// the pool, and returns when all are done. It runs fn inline when there is a single chunk.
func ParallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	t := kpool.get()
	t.n, t.grain = n, grain
	t.chunks = chunkCount(n, grain, 4, 1<<20)
	t.fn = fn
	kpool.exec(t)
}

// parallelRows runs body over [0, n) in chunks of at least grain rows (perThread chunks a thread at
// most), with the arguments already stored in t.
func parallelRows(t *task, n, grain, perThread int, body func(t *task, c, lo, hi int)) {
	t.n, t.grain = n, grain
	t.chunks = chunkCount(n, grain, perThread, maxPartials)
	t.run = body
	kpool.exec(t)
}
