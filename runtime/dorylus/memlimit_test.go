package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestHeapLimitFromCgroup runs a server role in a memory cgroup limited to 512 MiB (created
// for the test, as root, and removed after): it sets its heap limit to 90 % of it (460 MiB)
// and says so; with GOMEMLIMIT set, or without a limit below the machine's memory (a pod
// without one), it sets none and says nothing.
func TestHeapLimitFromCgroup(t *testing.T) {
	limitFile, procs := memoryCgroup(t, 512<<20)
	run := func(env ...string) string {
		t.Helper()
		cmd := exec.Command("sh", "-c", `echo $$ > "$1" && exec "$0" param-server --config /nonexistent`, dorylusBin, procs)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "load run config") {
			t.Fatalf("param-server --config /nonexistent: %v, want it to fail loading the config:\n%s", err, out)
		}
		return string(out)
	}
	const said = "dorylus: heap limit 460 MiB, 90 % of its cgroup's memory limit"
	if out := run(); !strings.Contains(out, said) {
		t.Errorf("in a cgroup limited by %s to 512 MiB:\n%s\nwant %q", limitFile, out, said)
	}
	if out := run("GOMEMLIMIT=1GiB"); strings.Contains(out, "heap limit") {
		t.Errorf("with GOMEMLIMIT set:\n%s\nwant no heap limit of its own", out)
	}
	// A pod without a limit: its cgroups allow the node's whole memory.
	machine, err := memlimit.FromSystem()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(limitFile, []byte(fmt.Sprint(machine)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(); strings.Contains(out, "heap limit") {
		t.Errorf("in a cgroup allowing the machine's %d MiB:\n%s\nwant no heap limit", machine>>20, out)
	}
}

// memoryCgroup makes a memory cgroup below the test process's own with a limit of bytes and
// returns its limit file and its cgroup.procs; it is removed when the test ends. It needs root
// and a writable cgroup v1 memory hierarchy or cgroup v2 with the memory controller.
func memoryCgroup(t *testing.T, bytes int64) (limitFile, procs string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a memory cgroup")
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no cgroups: %v", err)
	}
	var dir, limit string
	for line := range strings.SplitSeq(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) == 3 && parts[1] == "memory": // cgroup v1
			dir, limit = filepath.Join("/sys/fs/cgroup/memory", parts[2]), "memory.limit_in_bytes"
		case len(parts) == 3 && parts[0] == "0" && dir == "": // cgroup v2, unless v1 has memory
			dir, limit = filepath.Join("/sys/fs/cgroup", parts[2]), "memory.max"
		}
	}
	if _, err := os.Stat(filepath.Join(dir, limit)); dir == "" || err != nil && limit == "memory.limit_in_bytes" {
		t.Skipf("no memory cgroup to nest in (%s): %v", dir, err)
	}
	cg := filepath.Join(dir, fmt.Sprintf("dorylus-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(cg); err != nil {
			t.Errorf("remove the test's cgroup: %v", err)
		}
	})
	limitFile = filepath.Join(cg, limit)
	if err := os.WriteFile(limitFile, []byte(fmt.Sprint(bytes)), 0o644); err != nil {
		t.Fatalf("limit the test's cgroup: %v", err)
	}
	return limitFile, filepath.Join(cg, "cgroup.procs")
}

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

// collectEarly sets GOGC from the live heap, and again every second as the heap grows, unless
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
	collectEarly(t.Context())
	if got := gogc(); got != 30 {
		t.Errorf("GOGC=80 set: the GC percent was changed to %d", got)
	}

	t.Setenv("GOGC", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runtime.GC() // the live heap of the last cycle, not garbage an earlier test left
	collectEarly(ctx)
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
