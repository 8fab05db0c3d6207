//go:build e2e

// Package e2e drives the user's path on a local cluster (hack/local-cluster):
// helm install the operator chart, kubectl apply a sample job, wait for
// Succeeded, and compare the result with the single-process run. Run it with
// `make e2e` (build tag e2e), which starts the cluster first.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	root       = mustAbs("../..")
	clusterDir = envOr("LOCAL_CLUSTER_DIR", filepath.Join(os.Getenv("HOME"), ".cache/dorylus/local-cluster"))
	kubeconfig = filepath.Join(clusterDir, "kubeconfig")
	kubectl    = envOr("KUBECTL", filepath.Join(os.Getenv("HOME"), ".cache/dorylus/k8s-v1.37.2/kubectl"))
	helm       = envOr("HELM", filepath.Join(os.Getenv("HOME"), ".cache/dorylus/bin/helm"))
)

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// run runs a command with the cluster's kubeconfig and returns its stdout.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := tryRun(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

func tryRun(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	hh := filepath.Join(clusterDir, "helm")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+hh, "HELM_CONFIG_HOME="+hh, "HELM_DATA_HOME="+hh)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// dump prints, on failure, the job's conditions, the events and the last
// log lines of every pod process the node agent ran.
func dump(t *testing.T, ns string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	for _, args := range [][]string{
		{"get", "gnnjob", "-A", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status.conditions}{\"\\n\"}{end}"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"get", "pods", "-A", "-o", "wide"},
	} {
		out, err := tryRun(kubectl, args...)
		t.Logf("kubectl %s:\n%s%v", strings.Join(args, " "), out, err)
	}
	logs, _ := filepath.Glob(filepath.Join(clusterDir, "state/pods/*/logs/*.log"))
	logs = append(logs, filepath.Join(clusterDir, "logs/nodeagent.log"))
	for _, l := range logs {
		raw, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		t.Logf("last lines of %s:\n%s", l, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
}

// singleProcessAccuracy is the test accuracy of `dorylus train --output json`
// with the sample's hyper-parameters.
func singleProcessAccuracy(t *testing.T) float64 {
	out := run(t, filepath.Join(root, "bin/dorylus"), "train", "--dataset", "cora", "--epochs", "200", "--output", "json")
	var r struct {
		TestAccuracy float64 `json:"test_accuracy"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("dorylus train output %q: %v", out, err)
	}
	return r.TestAccuracy
}

func TestCoraCPU(t *testing.T) {
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Fatalf("no local cluster (%v): run make local-cluster", err)
	}
	const ns = "default"
	defer dump(t, ns)
	run(t, helm, "upgrade", "--install", "dorylus", filepath.Join(root, "charts/dorylus-operator"),
		"--namespace", "dorylus-system", "--create-namespace", "--wait", "--timeout", "120s")

	start := time.Now()
	run(t, kubectl, "apply", "-n", ns, "-f", filepath.Join(root, "config/samples/cpu_cora.yaml"))
	run(t, kubectl, "wait", "-n", ns, "gnnjob/cora-gcn-cpu", "--for=condition=Succeeded", "--timeout=300s")
	t.Logf("kubectl apply → Succeeded: %v", time.Since(start).Round(10*time.Millisecond))

	acc, err := strconv.ParseFloat(run(t, kubectl, "get", "-n", ns, "gnnjob/cora-gcn-cpu", "-o", "jsonpath={.status.progress.testAccuracy}"), 64)
	if err != nil {
		t.Fatalf("status.progress.testAccuracy: %v", err)
	}
	want := singleProcessAccuracy(t)
	if math.Abs(acc-want) > 0.01 {
		t.Errorf("test accuracy in .status %.4f, single-process run %.4f: more than 1 point apart", acc, want)
	}

	table := run(t, kubectl, "get", "-n", ns, "gnnjob", "cora-gcn-cpu")
	for _, col := range []string{"EPOCH", "VAL-ACC", "COST-USD"} {
		if !strings.Contains(table, col) {
			t.Errorf("kubectl get gnnjob has no %s column:\n%s", col, table)
		}
	}

	run(t, kubectl, "delete", "-n", ns, "gnnjob/cora-gcn-cpu", "--wait", "--timeout=120s")
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := run(t, kubectl, "get", "-n", ns, "pods,statefulsets,deployments,services,configmaps,serviceaccounts,roles,rolebindings",
			"-l", "dorylus.dev/job-name=cora-gcn-cpu", "-o", "name")
		procs, _ := filepath.Glob(filepath.Join(clusterDir, "state/pods", ns+"_cora-gcn-cpu-*", "volumes"))
		if strings.TrimSpace(left) == "" && len(procs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after deleting the job: children %q, pod sandboxes %v remain", left, procs)
		}
		time.Sleep(time.Second)
	}
}
