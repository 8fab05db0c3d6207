//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	singleOnce sync.Once
	singleAcc  float64
	singleErr  error
)

// singleProcessAccuracy is the test accuracy of `dorylus train --output json`
// with the samples' hyper-parameters (computed once).
func singleProcessAccuracy(t *testing.T) float64 {
	t.Helper()
	singleOnce.Do(func() {
		out, err := runIn(nil, filepath.Join(root, "bin/dorylus"), "train", "--dataset", "cora", "--epochs", "200", "--output", "json")
		if err != nil {
			singleErr = fmt.Errorf("dorylus train: %w", err)
			return
		}
		var r struct {
			TestAccuracy float64 `json:"test_accuracy"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			singleErr = fmt.Errorf("dorylus train output %q: %w", out, err)
		}
		singleAcc = r.TestAccuracy
	})
	if singleErr != nil {
		t.Fatal(singleErr)
	}
	return singleAcc
}

// TestCoraCPU is the user's path: kubectl apply the cpu sample, kubectl wait
// for Succeeded, read the accuracy and the printer columns, delete the job.
func TestCoraCPU(t *testing.T) {
	const name = "cora-gcn-cpu"
	c := setup(t, name)
	job, _ := sampleJob(t, "cpu_cora.yaml", name, nil)
	pods := int(job.Spec.GraphServers.Replicas + job.Spec.ParameterServers.Replicas)

	start := time.Now()
	run(t, kubectl, "apply", "-n", ns, "-f", filepath.Join(root, "config/samples/cpu_cora.yaml"))
	tl := watchJob(c, name, pods, start)
	defer tl.close()
	run(t, kubectl, "wait", "-n", ns, "gnnjob/"+name, "--for=condition=Succeeded", "--timeout=300s")
	tl.wait(t, msGone, 60*time.Second)
	t.Logf("timeline %s", tl.report())

	acc, err := strconv.ParseFloat(run(t, kubectl, "get", "-n", ns, "gnnjob/"+name, "-o", "jsonpath={.status.progress.testAccuracy}"), 64)
	if err != nil {
		t.Fatalf("status.progress.testAccuracy: %v", err)
	}
	want := singleProcessAccuracy(t)
	t.Logf("test accuracy: job %.4f, single process %.4f", acc, want)
	if math.Abs(acc-want) > 0.01 {
		t.Errorf("test accuracy in .status %.4f, single-process run %.4f: more than 1 point apart", acc, want)
	}

	table := run(t, kubectl, "get", "-n", ns, "gnnjob", name)
	t.Logf("kubectl get gnnjob:\n%s", table)
	for _, col := range []string{"EPOCH", "VAL-ACC", "COST-USD"} {
		if !strings.Contains(table, col) {
			t.Errorf("kubectl get gnnjob has no %s column:\n%s", col, table)
		}
	}
	deleteJob(t, name, tl.processes())
}

// TestTiming prints, for Cora with 2 graph servers, the time from kubectl
// apply to Succeeded and its split (scheduling, process start, training,
// teardown), for one job alone and for 4 jobs at once. It asserts only that
// the jobs succeed; set DORYLUS_E2E_TIMING=1 to run it (make e2e-timing).
func TestTiming(t *testing.T) {
	if os.Getenv("DORYLUS_E2E_TIMING") == "" {
		t.Skip("set DORYLUS_E2E_TIMING=1 (make e2e-timing) to print the timings")
	}
	rounds := []int{1, 4}
	var names []string
	for _, jobs := range rounds {
		for i := range jobs {
			names = append(names, fmt.Sprintf("cora-timing-%d-%d", jobs, i))
		}
	}
	c := setup(t, names...)
	for _, jobs := range rounds {
		var tls []*timeline
		for i := range jobs {
			name := fmt.Sprintf("cora-timing-%d-%d", jobs, i)
			job, manifest := sampleJob(t, "cpu_cora.yaml", name, nil)
			start := time.Now()
			apply(t, manifest)
			tls = append(tls, watchJob(c, name, int(job.Spec.GraphServers.Replicas+job.Spec.ParameterServers.Replicas), start))
		}
		for _, tl := range tls {
			waitJob(t, c, tl.name, "Succeeded", 600*time.Second, succeeded)
			tl.wait(t, msGone, 120*time.Second)
		}
		for _, tl := range tls {
			tl.close()
			fmt.Printf("timing, %d job(s) at once: %s\n", jobs, tl.report())
		}
		for _, tl := range tls {
			deleteJob(t, tl.name, tl.processes())
		}
	}
}
