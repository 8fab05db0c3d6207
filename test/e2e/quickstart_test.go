//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The folders the quick start's commands write in the repository's root, the job they run
// and the node's folder its volume is on (config/samples/volumes/models.yaml).
const (
	quickStartModel       = "cora-gcn-model"
	quickStartPredictions = "cora-gcn-predictions"
	quickStartJob         = "cora-gcn-model"
	quickStartVolumes     = "/var/lib/dorylus-local"
)

// TestQuickStart runs the README's quick start (the sh block under quickStartMarker) as
// written: in one bash -e from the repository's root, with the environment of a newcomer's
// shell (no KUBECONFIG, LOCAL_CLUSTER_DIR or make variables). Its commands start and stop a
// local cluster of their own, so it runs alone, after the suite's cluster has stopped (make
// e2e, make e2e-quickstart). The job must reach Succeeded; `kubectl get gnnjob` must print its
// epoch and validation accuracy and Succeeded True; the fetched folder must hold the model,
// which `dorylus predict` must load and score within a point of the test accuracy its card
// records; and the cluster must be gone at the end, its bridge and node folder with it. It
// logs each command's wall time.
func TestQuickStart(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, line, err := readmeBlock(readme, quickStartMarker)
	if err != nil {
		t.Fatal(err)
	}
	// The README's paths are those of the default state folder.
	if def := filepath.Join(os.Getenv("HOME"), ".cache/dorylus/local-cluster"); clusterDir != def {
		t.Fatalf("LOCAL_CLUSTER_DIR is %s: the quick start's commands use the default, %s", clusterDir, def)
	}
	if running := clusterRunning(); running != "" {
		t.Fatalf("a local cluster is running (%s): the quick start starts and stops its own; stop it first (make local-cluster-down), or run the suite with -skip TestQuickStart", running)
	}
	for _, dir := range []string{quickStartModel, quickStartPredictions} {
		if _, err := os.Stat(filepath.Join(root, dir)); err == nil {
			t.Fatalf("%s exists in the repository's root: the quick start writes it; remove it first", dir)
		}
	}
	t.Cleanup(func() {
		if running := clusterRunning(); running != "" {
			out, err := exec.Command(filepath.Join(root, "hack/local-cluster/cluster.sh"), "down").CombinedOutput()
			t.Logf("the quick start left a cluster running (%s): cluster.sh down: %v\n%s", running, err, out)
		}
		for _, dir := range []string{quickStartModel, quickStartPredictions} {
			_ = os.RemoveAll(filepath.Join(root, dir))
		}
	})

	t.Logf("README.md:%d, the quick start:\n%s", line, block)
	out, steps, err := runQuickStart(block)
	t.Logf("wall time of each command:\n%s", steps)
	if err != nil {
		t.Fatalf("the quick start (README.md:%d) stopped: %v\nits last output:\n%s", line, err, tail(out, 60))
	}

	// kubectl get gnnjob: the job's epoch, validation accuracy and Succeeded.
	row, err := tableRow(out, quickStartJob, "EPOCH", "VAL-ACC", "SUCCEEDED")
	if err != nil {
		t.Fatalf("kubectl get gnnjob: %v", err)
	}
	t.Logf("kubectl get gnnjob %s: %v", quickStartJob, row)
	if epoch, err := strconv.Atoi(row["EPOCH"]); err != nil || epoch < 1 || epoch > 200 {
		t.Errorf("kubectl get gnnjob: EPOCH %q, want the last epoch of the job's 200", row["EPOCH"])
	}
	if acc, err := strconv.ParseFloat(row["VAL-ACC"], 64); err != nil || acc < 0.7 || acc > 1 {
		t.Errorf("kubectl get gnnjob: VAL-ACC %q, want GCN's validation accuracy on Cora (about 0.79)", row["VAL-ACC"])
	}
	if row["SUCCEEDED"] != "True" {
		t.Errorf("kubectl get gnnjob: SUCCEEDED %q, want True", row["SUCCEEDED"])
	}

	// The fetched model, loaded by dorylus predict.
	if _, err := os.Stat(filepath.Join(root, quickStartModel, "model.json")); err != nil {
		t.Errorf("the fetched model: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, quickStartPredictions, "predict.json")); err != nil {
		t.Errorf("dorylus predict's output: %v", err)
	}
	m := regexp.MustCompile(`predicted (\d+) vertices, test accuracy ([0-9.]+)% \(the model scored ([0-9.]+)% on [^)]+\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no line of dorylus predict's accuracies in the output:\n%s", tail(out, 20))
	}
	predicted, _ := strconv.ParseFloat(m[2], 64)
	scored, _ := strconv.ParseFloat(m[3], 64)
	t.Logf("dorylus predict on the fetched model: %s vertices, test accuracy %.2f%%, the job's %.2f%%", m[1], predicted, scored)
	if m[1] != "2708" || scored < 75 || math.Abs(predicted-scored) > 1 {
		t.Errorf("dorylus predict: %s vertices, test accuracy %.2f%%, the job's %.2f%%: want Cora's 2708 vertices and the job's accuracy (≥ 75%%) within a point", m[1], predicted, scored)
	}

	// make local-cluster-down undid the cluster.
	if running := clusterRunning(); running != "" {
		t.Errorf("after the quick start a cluster is still running: %s", running)
	}
	if _, err := os.Stat(quickStartVolumes); err == nil {
		t.Errorf("after the quick start the node's folder %s remains", quickStartVolumes)
	}
}

// clusterRunning names what shows a local cluster running (its recorded pids, its bridge),
// or returns "".
func clusterRunning() string {
	pids, _ := filepath.Glob(filepath.Join(clusterDir, "pids", "*"))
	if len(pids) > 0 {
		return fmt.Sprintf("%d pids in %s", len(pids), filepath.Join(clusterDir, "pids"))
	}
	bridge := envOr("BRIDGE", "dorylus0")
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridge)); err == nil {
		return "bridge " + bridge
	}
	return ""
}

// runQuickStart runs block in bash -e -o pipefail from the repository's root, its output
// shown as it comes and returned, and returns the wall time of each command it traced.
func runQuickStart(block string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// The trace (set -x) stamps each command with its start; the block follows unchanged.
	script := "PS4='+ [${EPOCHREALTIME}] '\nset -x\n" + block
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = root
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "LOCAL_CLUSTER_DIR", "HELM", "KUBECTL", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var buf bytes.Buffer
	w := io.MultiWriter(&buf, os.Stdout)
	cmd.Stdout, cmd.Stderr = w, w
	start := time.Now()
	err := cmd.Run()
	return buf.String(), commandTimes(buf.String(), start, time.Now()), err
}

// traceLine is a command bash traced with runQuickStart's PS4: its start and the command.
var traceLine = regexp.MustCompile(`(?m)^\++ \[(\d+\.\d+)\] (.*)$`)

// commandTimes lists each traced command of out with its wall time (until the next command
// started, the last until end), and the total since start.
func commandTimes(out string, start, end time.Time) string {
	var b strings.Builder
	ms := traceLine.FindAllStringSubmatch(out, -1)
	for i, m := range ms {
		from, _ := strconv.ParseFloat(m[1], 64)
		to := float64(end.UnixNano()) / 1e9
		if i+1 < len(ms) {
			to, _ = strconv.ParseFloat(ms[i+1][1], 64)
		}
		fmt.Fprintf(&b, "%7.1f s  %s\n", to-from, m[2])
	}
	fmt.Fprintf(&b, "%7.1f s  in all\n", end.Sub(start).Seconds())
	return b.String()
}

// tableRow finds, in kubectl's output out, the header line holding columns and the row of
// name under it, and returns the row's value in each column (by the header's offsets, as
// kubectl aligns them; an empty cell is "").
func tableRow(out, name string, columns ...string) (map[string]string, error) {
	lines := strings.Split(out, "\n")
	for i, header := range lines {
		if !strings.HasPrefix(header, "NAME ") {
			continue
		}
		starts := map[string]int{}
		for _, c := range columns {
			if j := columnStart(header, c); j >= 0 {
				starts[c] = j
			}
		}
		if len(starts) < len(columns) {
			continue
		}
		for _, row := range lines[i+1:] {
			if f := strings.Fields(row); len(f) == 0 || f[0] != name {
				continue
			}
			cells := map[string]string{}
			for c, s := range starts {
				if s < len(row) && row[s] != ' ' {
					cells[c] = strings.Fields(row[s:])[0]
				}
			}
			return cells, nil
		}
		return nil, fmt.Errorf("no row %s under the header %q", name, header)
	}
	return nil, fmt.Errorf("no header with the columns %v in the output", columns)
}

// columnStart is the offset of column col in a header line of kubectl's, or -1.
func columnStart(header, col string) int {
	for off := 0; ; {
		j := strings.Index(header[off:], col)
		if j < 0 {
			return -1
		}
		j += off
		end := j + len(col)
		if (j == 0 || header[j-1] == ' ') && (end == len(header) || header[end] == ' ') {
			return j
		}
		off = end
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
