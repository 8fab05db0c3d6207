package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// placedKinds returns where a report's tasks ran, by task and layer: true for locally.
func placedKinds(t *testing.T, rep trainReport) map[string]bool {
	t.Helper()
	if rep.TensorTasks == nil {
		t.Fatal("the report counts no tensor tasks")
	}
	m := map[string]bool{}
	for _, k := range rep.TensorTasks.Kinds {
		m[fmt.Sprintf("%s %d", k.Task, k.Layer)] = k.Local
	}
	return m
}

// sameLosses fails unless two synchronous runs' losses agree to 1e-4 at every epoch.
func sameLosses(t *testing.T, got, want trainReport) {
	t.Helper()
	g, w := got.PerRun[0].Curve, want.PerRun[0].Curve
	if len(g) != len(w) {
		t.Fatalf("%d epochs, want %d", len(g), len(w))
	}
	for e := range w {
		if math.Abs(g[e].Loss-w[e].Loss) > 1e-4 {
			t.Errorf("epoch %d: loss %.6f, all remote %.6f", e+1, g[e].Loss, w[e].Loss)
		}
	}
}

// TestPlacementSplitsByCost trains a 2-layer GCN synchronously on one graph server of 8
// intervals whose cpu backend adds 3 ms to every task, the latency that stands for a call
// (hack/bench/latency-hiding.sh's), on a graph whose first layer is wide (256 dense features
// into 64) and whose output layer is narrow (64 into 4). By the planner's calibrated model an
// interval's first-layer AV and ∇AV (about 2 ms each) cost the server's 2 cores more for its 8
// intervals than a call's 3 ms, and the output layer's (about 0.3 ms) less: with --placement
// auto the output layer's tasks run in the graph server and the first layer's stay calls, with
// --placement remote every task is a call, and the losses agree (the same functions compute
// them).
func TestPlacementSplitsByCost(t *testing.T) {
	t.Setenv("GOMAXPROCS", "2") // the graph server's cores, which the placement weighs
	common := []string{"train", "--dataset", "rmat:nodes=20000,edges=100000,features=256,classes=4,seed=1", "--hidden", "64",
		"--graph-servers", "1", "--intervals", "8", "--staleness", "sync", "--epochs", "3", "--eval-every", "3",
		"--inject-latency", "3ms", "--output", "json"}
	auto := runCLI(t, common...)
	all := runCLI(t, append(common, "--placement", "remote")...)
	t.Logf("auto: %v; remote: %v", auto.TensorTasks, all.TensorTasks)
	want := map[string]bool{"AV 0": false, "∇AV 0": false, "AV 1": true, "∇AV 1": true}
	got := placedKinds(t, auto)
	for k, local := range want {
		if l, ok := got[k]; !ok || l != local {
			t.Errorf("auto: %s placed locally %v (seen %v), want %v", k, l, ok, local)
		}
	}
	// 3 epochs of 8 intervals, each kind once an interval and epoch, and the evaluation's
	// forward pass (AV of each layer once an interval)
	if tt := auto.TensorTasks; tt.Local != 2*3*8+8 || tt.Remote != 2*3*8+8 {
		t.Errorf("auto: %d local, %d remote tasks; want %d each", tt.Local, tt.Remote, 2*3*8+8)
	}
	if tt := all.TensorTasks; tt.Local != 0 || tt.Remote != 4*3*8+2*8 {
		t.Errorf("remote: %d local, %d remote tasks; want 0 and %d", tt.Local, tt.Remote, 4*3*8+2*8)
	}
	sameLosses(t, auto, all)
}

// TestPlacementOnFunctions trains Cora synchronously on 2 graph servers through `dorylus
// function` over HTTPS (the knative backend). Cora's tasks are small: by the planner's
// calibrated model every call's overhead and transfer cost more than computing the task, so
// with --placement auto every tensor task runs in the graph servers and the function serves
// none, the cost report charges no call and counts the local tasks; with --placement remote
// every task is a call, which the cost report charges; the losses agree.
func TestPlacementOnFunctions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, logs, err := run(t, "credentials", dir); err != nil {
		t.Fatalf("credentials: %v\n%s", err, logs)
	}
	token := filepath.Join(dir, pki.TokenFile)
	url, _ := remotetest.HTTPFunctionOf(t, dorylusBin, dir, "--token-file", token)
	common := []string{"train", "--graph-servers", "2", "--epochs", "4", "--intervals", "2", "--output", "json", "--eval-every", "4",
		"--staleness", "sync", "--backend", "knative", "--knative-urls", url, "--knative-token-file", token, "--credentials-dir", dir}
	auto := runCLI(t, common...)
	all := runCLI(t, append(common, "--placement", "remote")...)
	t.Logf("auto: %v; remote: %v", auto.TensorTasks, all.TensorTasks)
	tasks := int64(2 * 2 * (4*4 + 2)) // 2 servers × 2 intervals × (4 epochs × 4 kinds + the evaluation's 2 AVs)
	for k, local := range placedKinds(t, auto) {
		if !local {
			t.Errorf("auto: %s called the function", k)
		}
	}
	if tt := auto.TensorTasks; tt.Local != tasks || tt.Remote != 0 {
		t.Errorf("auto: %d local, %d remote tasks; want %d and 0", tt.Local, tt.Remote, tasks)
	}
	if tt := all.TensorTasks; tt.Local != 0 || tt.Remote != tasks {
		t.Errorf("remote: %d local, %d remote tasks; want 0 and %d", tt.Local, tt.Remote, tasks)
	}
	lines := func(rep trainReport) map[string]float64 {
		m := map[string]float64{}
		if rep.Cost != nil {
			for _, it := range rep.Cost.Items {
				m[strings.Fields(it.Name)[0]+" "+strings.Fields(it.Name)[1]] = it.Quantity
			}
		}
		return m
	}
	if a := lines(auto); a["knative calls"] != 0 || a["tensor tasks"] != float64(tasks) {
		t.Errorf("auto's cost report: %v, want no calls and %d tasks in the graph servers", a, tasks)
	}
	if r := lines(all); r["knative calls"] <= 0 || r["tensor tasks"] != 0 {
		t.Errorf("remote's cost report: %v, want the calls' vCPU-seconds and no local tasks", r)
	}
	sameLosses(t, auto, all)
}
