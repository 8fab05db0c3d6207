package gctune

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// Graph servers and the partitioner let garbage grow by a twentieth of the live heap, at least
// 64 MiB, between collections.
func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 100}, {16 << 20, 100}, {64 << 20, 100}, {128 << 20, 50}, {256 << 20, 25},
		{1 << 30, 6}, {2 << 30, 5}, {100 << 30, 5},
	} {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// CollectEarly sets GOGC from the live heap, and again every second as the heap grows, unless
// $GOGC says otherwise.
func TestCollectEarly(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(30)
	CollectEarly(t.Context())
	if got := gogc(); got != 30 {
		t.Errorf("GOGC=80 set: the GC percent was changed to %d", got)
	}

	t.Setenv("GOGC", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runtime.GC() // the live heap of the last cycle, not garbage an earlier test left
	CollectEarly(ctx)
	if got := gogc(); got != 100 { // a test's heap is far below 64 MiB
		t.Errorf("GOGC unset, small heap: GC percent %d, want 100", got)
	}
	live := make([]float32, 64<<20) // 256 MiB, kept to the end
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for gogc() > 25 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := gogc(); got < 20 || got > 25 { // 64 MiB of 256 MiB and what else is live
		t.Errorf("GOGC unset, 256 MiB live: GC percent %d after 5 s, want 20 to 25", got)
	}
	runtime.KeepAlive(live)
}
