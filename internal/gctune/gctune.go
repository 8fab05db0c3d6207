// Package gctune sets the Go garbage collector up for the data plane's processes: a heap limit
// from the memory limit of the process's cgroup (LimitHeap) and a small headroom of garbage
// over the live heap (CollectEarly).
package gctune

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// LimitHeap bounds the Go heap to 90 % of the memory limit of the process's cgroup (a pod's
// container), unless $GOMEMLIMIT is set or $AUTOMEMLIMIT is off, and says so on w. Without it
// the garbage collector lets the heap grow to twice what is live, so a server whose buffers fill
// 60 % of its container is killed by the kernel; with it, the collector works harder near the
// limit instead. A cgroup that allows the machine's whole memory or more (a pod without a
// limit, whose parent cgroups hold the node's capacity) is no limit: nothing changes.
func LimitHeap(w io.Writer) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	container, err := memlimit.FromCgroup()
	if err != nil {
		return
	}
	if machine, err := memlimit.FromSystem(); err != nil || container >= machine {
		return
	}
	limit, err := memlimit.Set(memlimit.WithProvider(memlimit.Limit(container)))
	if err == nil && limit > 0 && limit < math.MaxInt64 {
		fmt.Fprintf(w, "dorylus: heap limit %d MiB, 90 %% of its cgroup's memory limit (GOMEMLIMIT; AUTOMEMLIMIT=off to leave it unset)\n", limit>>20)
	}
}

// CollectEarly makes the garbage collector of a graph server or partitioner run once the heap
// has grown by gcHeadroom of what is live (GOGC, measured afresh every second), unless $GOGC
// is set, until ctx ends. Their heaps are almost all long-lived arrays without pointers
// (float32 rows; a partitioner's adjacency levels), which cost a collection nothing to scan,
// so a small headroom costs little CPU and keeps the peak near what is live, where Go's
// default lets the heap double (R-MAT 1M/20M/32 on 4 graph servers, 12 epochs: 7.9 GiB
// resident in all, against 9.8 GiB with GOGC 25). A small heap (a few intervals of a small
// graph) keeps at least 64 MiB of headroom: collecting after every few messages (GOGC 5)
// slowed Coauthor CS's epochs by a sixth or more.
func CollectEarly(ctx context.Context) {
	if os.Getenv("GOGC") != "" {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := func() {
		metrics.Read(sample)
		debug.SetGCPercent(gcPercent(sample[0].Value.Uint64()))
	}
	set()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				set()
			}
		}
	}()
}

// gcPercent returns the GOGC that lets garbage grow to gcHeadroom(live) before a collection,
// from 5 to 100 (Go's default).
func gcPercent(live uint64) int {
	if live == 0 {
		return 100
	}
	return int(min(max(100*gcHeadroom(live)/live, 5), 100))
}

// gcHeadroom is the garbage let grow between collections over a live heap: a twentieth of it,
// at least 64 MiB, so that a small heap (a few intervals' buffers) is not collected after every
// few messages.
func gcHeadroom(live uint64) uint64 { return max(live/20, 64<<20) }
