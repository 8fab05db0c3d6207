package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// TestCheckMemory: a run whose rows exceed the machine's memory is refused naming the flags
// that multiply into it, the need, one layer's rows and the memory; one that fits, or a machine
// of unknown memory, passes.
func TestCheckMemory(t *testing.T) {
	const gib = 1 << 30
	o := trainOptions{model: "gcn", layers: 2, hidden: 65536}
	w := plan.Workload{Vertices: 1_000_000, Entries: 10_000_000, Features: 100, Classes: 10, Model: o.planModel()}
	single := needOf(w, plan.Config{Backend: plan.CPU, Intervals: 1, Staleness: jobconfig.Sync}, 0, 0)
	if got, want := single.rows, 4*1e6*65536.0; got != want {
		t.Errorf("one layer's rows: %g bytes, want %g", got, want)
	}
	err := checkMemory(single, 24*gib, o, "big")
	want := "--hidden 65536 with --layers 2 on big in one process needs about 732.4 GiB (one layer's rows of every vertex: 244.1 GiB); this machine has 24.0 GiB"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checkMemory: %v, want %q", err, want)
	}
	dist := needOf(w, plan.Config{Backend: plan.CPU, Intervals: 4, Staleness: jobconfig.Sync}, 4, 1)
	if err := checkMemory(dist, 24*gib, o, "big"); err == nil || !strings.Contains(err.Error(), "on big on 4 graph servers needs about") {
		t.Errorf("checkMemory on graph servers: %v", err)
	}
	if dist.total < 4*dist.rows {
		t.Errorf("4 graph servers need %g bytes, less than a layer's rows for each", dist.total)
	}
	// A graph server's fixed bytes are its own model's (graphserver.Footprint: 40 MiB for a
	// GCN), counted once: on a graph of a thousand vertices, 4 graph servers and 2 parameter
	// servers (42 MiB each and their few weights) need 4·40 + 2·42 MiB and less than 1 MiB of
	// rows a graph server (the double count was 24 MiB more a server).
	tiny := plan.Workload{Vertices: 1000, Entries: 10_000, Features: 8, Classes: 4, Model: trainOptions{model: "gcn", layers: 2, hidden: 16}.planModel()}
	if n, fixed := needOf(tiny, plan.Config{Backend: plan.CPU, Intervals: 4, Staleness: jobconfig.Bounded(1)}, 4, 2), float64((4*40+2*42)<<20); n.total < fixed || n.total > fixed+4<<20 {
		t.Errorf("4 + 2 servers of a 1000-vertex graph: %.2f MiB, want %.0f MiB and its rows (< 1 MiB a graph server)", n.total/(1<<20), fixed/(1<<20))
	}
	sage := trainOptions{model: "sage", layers: 2, hidden: 16}
	if m := sage.planModel(); m.Architecture != plan.SAGE {
		t.Errorf("--model sage: plan architecture %v", m.Architecture)
	}
	gat := trainOptions{model: "gat", layers: 2, hidden: 8, heads: 8}
	if n := needOf(plan.Workload{Vertices: 1000, Entries: 10000, Features: 10, Classes: 3, Model: gat.planModel()},
		plan.Config{Backend: plan.CPU, Intervals: 1, Staleness: jobconfig.Sync}, 0, 0); n.rows != 4*1000*64 {
		t.Errorf("a GAT's rows: %g bytes, want its heads' concatenation, %d", n.rows, 4*1000*64)
	}
	small := trainOptions{model: "gcn", layers: 2, hidden: 16}
	w.Model = small.planModel()
	if err := checkMemory(needOf(w, plan.Config{Backend: plan.CPU, Intervals: 1, Staleness: jobconfig.Sync}, 0, 0), 24*gib, small, "big"); err != nil {
		t.Errorf("a run that fits: %v", err)
	}
	if err := checkMemory(single, 0, o, "big"); err != nil {
		t.Errorf("memory unknown: %v", err)
	}
}

// underMemoryLimit runs the dorylus binary with args under a 4 GiB address-space limit, where an
// allocation of a model too big for the machine fails with Go's fatal out-of-memory, and
// returns its output, how long it took and its error.
func underMemoryLimit(args ...string) (string, time.Duration, error) {
	start := time.Now()
	cmd := exec.Command("sh", "-c", `ulimit -v 4194304; exec "$0" "$@"`, dorylusBin)
	cmd.Args = append(cmd.Args, args...)
	out, err := cmd.CombinedOutput()
	return string(out), time.Since(start), err
}

// TestTrainRefusesRunTooBigForMemory: dorylus train of a model whose rows no machine holds is
// refused in seconds, once the dataset is loaded and before the model allocates anything
// (underMemoryLimit).
func TestTrainRefusesRunTooBigForMemory(t *testing.T) {
	for _, args := range [][]string{
		{"--hidden", "65536", "--layers", "16"},
		{"--hidden", "65536", "--layers", "16", "--graph-servers", "2"},
	} {
		msg, took, err := underMemoryLimit(append([]string{"train", "--epochs", "1",
			"--dataset", "rmat:nodes=1000000,edges=1000000,features=8,classes=4,seed=1"}, args...)...)
		if err == nil || !strings.Contains(msg, "--hidden 65536 with --layers 16 on rmat-n1000000-e1000000-f8-c4-s1") ||
			!strings.Contains(msg, "(one layer's rows of every vertex: 244.1 GiB); this machine has") || strings.Contains(msg, "out of memory") {
			t.Errorf("train %v: %v after %v:\n%s", args, err, took, msg)
		}
		t.Logf("train %v refused in %v", args, took.Round(time.Millisecond))
	}
}

// TestPredictRefusesRunTooBigForMemory: dorylus predict of a wide model (hidden 65536, trained
// on a graph of 100 vertices) on a graph of a million vertices, whose rows no machine holds,
// is refused in seconds, in one process and on graph servers, naming the model's sizes, once
// the dataset is loaded and before the model's rows are allocated (underMemoryLimit).
func TestPredictRefusesRunTooBigForMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	if _, logs, err := run(t, "train", "--epochs", "1", "--hidden", "65536", "--layers", "2", "--output-dir", dir,
		"--dataset", "rmat:nodes=100,edges=500,features=8,classes=4,seed=1"); err != nil {
		t.Fatalf("train: %v\n%s", err, logs)
	}
	for _, args := range [][]string{nil, {"--graph-servers", "2"}} {
		out := filepath.Join(t.TempDir(), "predictions")
		msg, took, err := underMemoryLimit(append([]string{"predict", "--model", dir, "--output-dir", out,
			"--dataset", "rmat:nodes=1000000,edges=1000000,features=8,classes=4,seed=1"}, args...)...)
		if err == nil || !strings.Contains(msg, "the model in "+dir+" (hidden 65536 with layers 2) on rmat-n1000000-e1000000-f8-c4-s1") ||
			!strings.Contains(msg, "(one layer's rows of every vertex: 244.1 GiB); this machine has") || strings.Contains(msg, "out of memory") {
			t.Errorf("predict %v: %v after %v:\n%s", args, err, took, msg)
		}
		if _, err := os.Stat(filepath.Join(out, "predict.json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("predict %v refused, yet predict.json: %v", args, err)
		}
		t.Logf("predict %v refused in %v", args, took.Round(time.Millisecond))
	}
}
