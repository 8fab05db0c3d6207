package graphserver

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
)

// Writers fill two slots per source (local intervals' owned rows) with their epoch, an epoch at
// a time, while readers read every source at an epoch from a view of what is complete that lags
// behind by up to three epochs, as a graph server's scheduler may: no reader ever sees a slot
// that is not wholly the epoch it reads, no reader reads older than it was handed, and every
// read ends. Under -race, a write and a read of the same slot at once is also a data race.
func TestSlotGuardReadsWholeEpochs(t *testing.T) {
	const parts, intervals, epochs, rows = 2, 2, 300, 64
	g := newSlotGuard(parts*intervals, 2, func(p, i int) int { return p*intervals + i }, func(int) bool { return true })
	n := parts * intervals
	slots := make([][2][]float32, n)
	for s := range slots {
		slots[s] = [2][]float32{make([]float32, rows), make([]float32, rows)}
		for r := range slots[s] {
			for i := range slots[s][r] {
				slots[s][r][i] = -1
			}
		}
	}
	complete := newWritten(n)
	var wg sync.WaitGroup
	var reads atomic.Int64
	for s := range n {
		wg.Go(func() {
			for e := range epochs {
				for reads.Load() < int64(e) { // keep pace with the readers
					runtime.Gosched()
				}
				if err := g.write(rowsDZ, 1, s, e); err != nil {
					t.Error(err)
					complete[s].Store(epochs - 1) // let the readers end
					return
				}
				buf := slots[s][e%2]
				for i := range buf {
					buf[i] = float32(e)
					if i%16 == 0 {
						runtime.Gosched()
					}
				}
				complete[s].Store(int64(e))
			}
		})
	}
	for k := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(k), 7))
			for !complete.all(epochs) {
				rs := complete.reads(rng, 4, intervals)
				handed := append([]pipeline.Read(nil), rs...)
				done := g.read(rowsDZ, 1, rs)
				for i, r := range rs {
					s := r.From.Partition*intervals + r.From.Interval
					if r.Epoch < handed[i].Epoch {
						t.Errorf("source %d: handed epoch %d, read %d", s, handed[i].Epoch, r.Epoch)
					}
					for j, v := range slots[s][r.Epoch%2] {
						if v != float32(r.Epoch) {
							t.Errorf("source %d, epoch %d: row %d holds epoch %v", s, r.Epoch, j, v)
							break
						}
						if j%16 == 0 {
							runtime.Gosched()
						}
					}
				}
				done()
				reads.Add(1)
			}
		})
	}
	wg.Wait()
	// Every reader is done: a source's next epoch claims at once; an old one is refused.
	if err := g.write(rowsDZ, 1, 0, epochs); err != nil {
		t.Fatal(err)
	}
	if err := g.write(rowsDZ, 1, 0, epochs-2); err == nil || !strings.Contains(err.Error(), "after rows of epoch") {
		t.Fatalf("claim of an older epoch: %v", err)
	}
	// The other kind and layers are apart: their first claims are free.
	if err := g.write(rowsP, 1, 0, 0); err != nil {
		t.Fatal(err)
	}
}

// Peers' batches overwrite the one slot of their interval's ghost rows with each newer epoch
// while Gathers read those rows, and local writers their owned rows' two slots, at once: every
// Gather sees each peer's rows wholly of one epoch, no older than it was handed, and never
// reads a row while it is stored (under -race, a data race); every batch and every Gather ends
// (a deadlock would hang the test).
func TestSlotGuardOneGhostSlot(t *testing.T) {
	const parts, intervals, epochs, rows = 3, 2, 200, 48
	n := parts * intervals
	local := func(src int) bool { return src/intervals == 0 } // this server is partition 0
	g := newSlotGuard(n, 1, func(p, i int) int { return p*intervals + i }, local)
	slots := make([][2][]float32, n) // a peer's interval uses slot 0 only
	for s := range slots {
		slots[s] = [2][]float32{make([]float32, rows), make([]float32, rows)}
	}
	complete := newWritten(n)
	var wg sync.WaitGroup
	for s := range n {
		wg.Go(func() {
			for e := range epochs {
				buf, done := slots[s][e%2], func() {}
				if local(s) {
					if err := g.write(rowsP, 0, s, e); err != nil {
						t.Error(err)
						return
					}
				} else {
					var err error
					buf = slots[s][0]
					if done, err = g.store(rowsP, 0, s, e); err != nil {
						t.Error(err)
						return
					}
				}
				for i := range buf {
					buf[i] = float32(e)
					if i%8 == 0 {
						runtime.Gosched()
					}
				}
				done()
				complete[s].Store(int64(e))
			}
		})
	}
	var gathers atomic.Int64
	for k := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(k), 9))
			for !complete.all(epochs) {
				rs := complete.reads(rng, 3, intervals)
				handed := append([]pipeline.Read(nil), rs...)
				done := g.read(rowsP, 0, rs)
				for i, r := range rs {
					s := r.From.Partition*intervals + r.From.Interval
					buf := slots[s][0]
					if local(s) {
						buf = slots[s][r.Epoch%2]
					}
					first := buf[0]
					for j, v := range buf {
						if v != first || (local(s) && v != float32(r.Epoch)) || int(v) < handed[i].Epoch {
							t.Errorf("source %d handed epoch %d: row %d holds epoch %v, row 0 %v", s, handed[i].Epoch, j, v, first)
							break
						}
						if j%8 == 0 {
							runtime.Gosched()
						}
					}
				}
				done()
				gathers.Add(1)
			}
		})
	}
	wg.Wait()
	if gathers.Load() == 0 {
		t.Fatal("no Gather ran")
	}
	// Every Gather is done: a peer's next batch stores at once; an older one is refused.
	done, err := g.store(rowsP, 0, intervals, epochs)
	if err != nil {
		t.Fatal(err)
	}
	done()
	if _, err := g.store(rowsP, 0, intervals, epochs-2); err == nil || !strings.Contains(err.Error(), "after rows of epoch") {
		t.Fatalf("a batch of an older epoch: %v", err)
	}
}

// written holds the newest epoch written whole of every source, -1 before any.
type written []atomic.Int64

func newWritten(n int) written {
	w := make(written, n)
	for s := range w {
		w[s].Store(-1)
	}
	return w
}

// all reports whether every source has written its last of epochs.
func (w written) all(epochs int) bool {
	for s := range w {
		if w[s].Load() < int64(epochs-1) {
			return false
		}
	}
	return true
}

// reads returns a read of every source written, each of an epoch up to lag-1 behind its
// newest, as a graph server's scheduler may hand them (intervals per partition).
func (w written) reads(rng *rand.Rand, lag, intervals int) []pipeline.Read {
	var rs []pipeline.Read
	for s := range w {
		if e := int(w[s].Load()) - rng.IntN(lag); e >= 0 {
			rs = append(rs, pipeline.Read{From: pipeline.IntervalID{Partition: s / intervals, Interval: s % intervals}, Epoch: e})
		}
	}
	return rs
}
