package launcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// serverScript writes a stand-in for the dorylus binary: a process that notes its pid in the
// file $LAUNCH_TEST_PIDS names and serves until its standard input closes, as a server does
// (--stop-on-stdin-eof). It returns the script and the pid file.
func serverScript(t *testing.T) (exe, pids string) {
	t.Helper()
	dir := t.TempDir()
	exe, pids = filepath.Join(dir, "server"), filepath.Join(dir, "pids")
	script := "#!/bin/sh\necho $$ >> \"$LAUNCH_TEST_PIDS\"\nexec cat >/dev/null\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LAUNCH_TEST_PIDS", pids)
	return exe, pids
}

// startedPids returns the pids the servers noted.
func startedPids(t *testing.T, file string) []int {
	t.Helper()
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		out = append(out, pid)
	}
	return out
}

// launchConfig is a run of graph servers and one parameter server, in plaintext.
func launchConfig(graphServers int) *jobconfig.RunConfig {
	return &jobconfig.RunConfig{
		Version:          jobconfig.Version,
		Job:              jobconfig.JobRef{Name: "launch", Namespace: "local"},
		Dataset:          jobconfig.Dataset{Source: jobconfig.SourcePVC, Path: "/nonexistent", Format: jobconfig.FormatPrepared},
		Model:            jobconfig.Model{Architecture: jobconfig.ArchitectureGCN, Layers: 2, Hidden: 16},
		Training:         jobconfig.Training{Epochs: 1, LearningRate: 0.01, Staleness: jobconfig.Sync, Seed: 1},
		GraphServers:     jobconfig.GraphServers{Replicas: graphServers},
		ParameterServers: jobconfig.ParameterServers{Replicas: 1},
		Backend:          jobconfig.Backend{Kind: jobconfig.BackendCPU, CPU: &jobconfig.CPU{}},
		Security:         jobconfig.Security{Insecure: true},
	}
}

// TestLaunchStopsWhenCancelled: a launch whose context ends while it starts the most graph
// servers a run may have (the launcher's SIGTERM during start-up) starts no more, and has
// stopped every process it started when it returns the context's error; one whose context
// has ended starts none.
func TestLaunchStopsWhenCancelled(t *testing.T) {
	exe, pids := serverScript(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // cancel once the first server runs
		for st, err := os.Stat(pids); err != nil || st.Size() == 0; st, err = os.Stat(pids) {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	n := jobconfig.Limits.GraphServers.Max
	start := time.Now()
	run, err := Launch(ctx, launchConfig(n), Options{Exe: exe, Work: t.TempDir(), Log: os.Stderr})
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) || run != nil {
		if run != nil {
			run.Stop()
		}
		t.Fatalf("Launch: %v, %v: want context.Canceled and no run", run, err)
	}
	started := startedPids(t, pids)
	t.Logf("%d of %d servers started, Launch returned %v after start: %v", len(started), n+1, took.Round(time.Millisecond), err)
	if len(started) == 0 || len(started) > n {
		t.Errorf("%d servers started of %d: want some, not all", len(started), n+1)
	}
	for _, pid := range started {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("server %d still runs after Launch returned (%v)", pid, err)
		}
	}
	if took > 10*time.Second {
		t.Errorf("Launch returned %v after start: want within seconds", took)
	}

	exe, pids = serverScript(t)
	if _, err := Launch(ctx, launchConfig(2), Options{Exe: exe, Work: t.TempDir(), Log: os.Stderr}); !errors.Is(err, context.Canceled) {
		t.Errorf("Launch with an ended context: %v, want context.Canceled", err)
	}
	time.Sleep(100 * time.Millisecond) // a server started by mistake notes its pid at once
	if got := startedPids(t, pids); len(got) != 0 {
		t.Errorf("Launch with an ended context started %d servers", len(got))
	}
}
