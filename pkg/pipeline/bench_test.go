package pipeline

import (
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// BenchmarkSchedulerOverhead measures the scheduler's cost per task (one Start and one Done,
// plus a share of the Ready calls) for P = 4 graph servers of 64 intervals each and L = 2, all
// intervals reading all (the worst case for GA's Reads). The driver keeps up to 64 tasks in
// flight and finishes them in start order; it calls Ready when nothing is in flight, or, in the
// "each" variants, after every Done, as a graph server's event loop might.
func BenchmarkSchedulerOverhead(b *testing.B) {
	for _, m := range []struct {
		name  string
		sync  bool
		stale int
		each  bool
	}{{"sync", true, 0, false}, {"S0", false, 0, false}, {"S1", false, 1, false}, {"sync-each", true, 0, true}, {"S1-each", false, 1, true}} {
		b.Run(m.name, func(b *testing.B) {
			const perEpoch = 4 * 64 * (6*2 + 2)
			cfg := Config{Partitions: 4, Intervals: 64, Layers: 2, Epochs: b.N/perEpoch + 2,
				Staleness: staleness(m.sync, m.stale)}
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ready := make([]Task, 0, 256)
			queue := make([]Task, 0, 256)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if len(queue) == 0 || m.each {
					ready = s.AppendReady(ready[:0])
					for _, t := range ready {
						if len(queue) == 64 {
							break
						}
						if _, err := s.Start(t); err != nil {
							b.Fatal(err)
						}
						queue = append(queue, t)
					}
					if len(queue) == 0 {
						b.Fatalf("stalled at %v", s.Progress())
					}
				}
				if err := s.Done(queue[0]); err != nil {
					b.Fatal(err)
				}
				queue = queue[1:]
			}
		})
	}
}

// BenchmarkReady measures one Ready call over 256 intervals.
func BenchmarkReady(b *testing.B) {
	s, err := New(Config{Partitions: 4, Intervals: 64, Layers: 2, Epochs: 10, Staleness: jobconfig.Bounded(1)})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]Task, 0, 256)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = s.AppendReady(buf[:0])
	}
}
