package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
)

// TestTrainPreparedPartitions: `dorylus train --graph-servers 2` on a directory written by
// `dorylus prepare --partitions 2` (partition files and their manifest, no whole graph) and on a
// prepared whole-graph file trains as the single process does; a directory of another part count, a file of another
// partitioning or a corrupted one, and more parts than vertices are refused with an error
// naming the file.
func TestTrainPreparedPartitions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cora-2")
	cli(t, "prepare", "cora", dir, "--partitions", "2")
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(names) != 3 {
		t.Fatalf("prepare wrote %v, want two partition files and %s", names, partition.ManifestFileName)
	}
	train := []string{"train", "--dataset", dir, "--staleness", "sync", "--epochs", "30", "--eval-every", "30", "--output", "json"}
	rep := runCLI(t, append(train, "--graph-servers", "2")...)
	o := coraOptions(30)
	want, final := singleProcess(t, o, 1)
	got := rep.PerRun[0]
	t.Logf("final loss %.7f (single process %.7f), test accuracy %.4f (%.4f)", got.FinalLoss, want[29], got.TestAcc, final.TestAcc)
	if rep.Dataset != "cora" || rep.Nodes != 2708 || math.Abs(got.FinalLoss-want[29]) > 1e-6*want[29] || math.Abs(got.TestAcc-final.TestAcc) > 0.002 {
		t.Errorf("dataset %s of %d nodes, final loss %.7f, test accuracy %.4f; single process %.7f, %.4f", rep.Dataset, rep.Nodes, got.FinalLoss, got.TestAcc, want[29], final.TestAcc)
	}
	var peak int64
	for _, name := range []string{"graph-server 0", "graph-server 1", "param-server 0"} {
		if rep.PeakRSSByProcess[name] <= 0 {
			t.Errorf("peak RSS by process %v: none for %s", rep.PeakRSSByProcess, name)
		}
		peak = max(peak, rep.PeakRSSByProcess[name])
	}
	if len(rep.PeakRSSByProcess) != 3 || rep.PeakRSSBytes != peak {
		t.Errorf("peak RSS %d, by process %v: want the largest of the three servers'", rep.PeakRSSBytes, rep.PeakRSSByProcess)
	}
	// A prepared whole-graph file: the launcher cuts it by streaming, to the same result.
	file := filepath.Join(t.TempDir(), "cora.dorylus")
	cli(t, "prepare", "cora", file)
	rep = runCLI(t, append(append([]string{"train", "--dataset", file}, train[3:]...), "--graph-servers", "2")...)
	if got := rep.PerRun[0]; math.Abs(got.FinalLoss-want[29]) > 1e-6*want[29] {
		t.Errorf("from the prepared file %s: final loss %.7f, single process %.7f", file, got.FinalLoss, want[29])
	}

	other := filepath.Join(t.TempDir(), "contiguous")
	cli(t, "prepare", "cora", other, "--partitions", "2", "--method", "contiguous")
	name1 := graph.PartitionFileName(1, 2)
	swapped, corrupt := copyDir(t, dir), copyDir(t, dir)
	copyFile(t, filepath.Join(other, name1), filepath.Join(swapped, name1))
	raw, err := os.ReadFile(filepath.Join(corrupt, name1))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x20
	if err := os.WriteFile(filepath.Join(corrupt, name1), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"another part count", append(train, "--graph-servers", "3"), []string{filepath.Join(dir, partition.ManifestFileName), "holds 2 partitions of cora, want 3"}},
		{"another partitioning", append(train[:2:2], swapped, "--graph-servers", "2"), []string{filepath.Join(swapped, name1), "another dataset or partitioning"}},
		{"corrupted", append(train[:2:2], corrupt, "--graph-servers", "2", "--epochs", "2"), []string{filepath.Join(corrupt, name1), "checksum mismatch"}},
		{"more parts than vertices", []string{"train", "--dataset", "rmat:nodes=100,edges=400,features=4,classes=2,seed=1", "--graph-servers", "200"}, []string{"200 parts of a 100-vertex graph"}},
	} {
		msg := cliFails(t, tc.args...)
		t.Logf("%s: %s", tc.name, msg)
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", tc.name, msg, w)
			}
		}
	}
}

// cli runs the built binary and fails the test if it fails.
func cli(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(dorylusBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("dorylus %v: %v\n%s", args, err, out)
	}
}

// cliFails runs the built binary, expects it to fail, and returns its standard error.
func cliFails(t *testing.T, args ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(dorylusBin, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("dorylus %v succeeded", args)
	}
	return stderr.String()
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
