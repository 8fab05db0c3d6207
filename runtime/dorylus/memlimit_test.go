package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
