//go:build e2e

package e2e

import (
	"context"
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

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

var (
	trainMu  sync.Mutex
	trainAcc = map[string]float64{}
)

// trainAccuracy is the test accuracy of `dorylus train --output json` with
// args on this machine (each set of args run once), the figure a job of the
// same settings must reach.
func trainAccuracy(t *testing.T, args ...string) float64 {
	t.Helper()
	trainMu.Lock()
	defer trainMu.Unlock()
	key := strings.Join(args, " ")
	if acc, ok := trainAcc[key]; ok {
		return acc
	}
	out, err := runIn(nil, filepath.Join(root, "bin/dorylus"), append([]string{"train", "--output", "json"}, args...)...)
	if err != nil {
		t.Fatalf("dorylus train %s: %v", key, err)
	}
	var r struct {
		TestAccuracy float64 `json:"test_accuracy"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("dorylus train %s: output %q: %v", key, out, err)
	}
	trainAcc[key] = r.TestAccuracy
	return r.TestAccuracy
}

// singleProcessAccuracy is the test accuracy of one process trained with the
// Cora samples' hyper-parameters.
func singleProcessAccuracy(t *testing.T) float64 {
	return trainAccuracy(t, "--dataset", "cora", "--epochs", "200")
}

// jobAccuracy reads a finished job's status.progress.testAccuracy and checks
// it is within 1 point of want.
func jobAccuracy(t *testing.T, c client.Client, name string, want float64) {
	t.Helper()
	job := getJob(context.Background(), t, c, name)
	if job == nil || job.Status.Progress == nil || job.Status.Progress.TestAccuracy == nil {
		t.Fatalf("gnnjob %s: no status.progress.testAccuracy: %s", name, conditions(job))
	}
	acc, err := strconv.ParseFloat(string(*job.Status.Progress.TestAccuracy), 64)
	if err != nil {
		t.Fatalf("gnnjob %s: status.progress.testAccuracy: %v", name, err)
	}
	t.Logf("test accuracy: job %s %.4f, dorylus train %.4f", name, acc, want)
	if math.Abs(acc-want) > 0.01 {
		t.Errorf("gnnjob %s: test accuracy in .status %.4f, dorylus train %.4f: more than 1 point apart", name, acc, want)
	}
}

// runSample applies config/samples/file as job name changed by edit (nil:
// as shipped), waits for Succeeded and its pods to go, checks its accuracy
// against want (given the job as the API server defaulted it) and runs the
// checks on the finished job, deletes it and returns it as it finished.
func runSample(t *testing.T, c client.Client, file, name string, edit func(*dorylusv1alpha1.GNNTrainingJob), timeout time.Duration,
	want func(*dorylusv1alpha1.GNNTrainingJob) float64, checks ...func(*dorylusv1alpha1.GNNTrainingJob)) *dorylusv1alpha1.GNNTrainingJob {
	t.Helper()
	job, manifest := sampleJob(t, file, name, edit)
	start := time.Now()
	apply(t, manifest)
	pods := job.Spec.GraphServers.Replicas + job.Spec.ParameterServers.Replicas
	if job.Spec.Inference != nil {
		pods = job.Spec.GraphServers.Replicas
	}
	tl := watchJob(c, name, int(pods), start)
	defer tl.close()
	job = waitJob(t, c, name, "Succeeded", timeout, succeeded)
	tl.wait(t, msGone, 120*time.Second)
	t.Logf("timeline %s", tl.report())
	jobAccuracy(t, c, name, want(job))
	for _, check := range checks {
		check(job)
	}
	deleteJob(t, name, tl.processes())
	return job
}

// trainArgs are the `dorylus train` flags of a job's model and training as
// the API server defaulted them, on dataset, with the job's graph and
// parameter servers (the same cut and dropout masks), staleness and
// intervals (when the job sets them).
func trainArgs(job *dorylusv1alpha1.GNNTrainingJob, dataset string) []string {
	m, tr := job.Spec.Model, job.Spec.Training
	args := []string{"--dataset", dataset, "--model", jobconfig.ModelName(string(m.Architecture)), "--layers", fmt.Sprint(m.Layers),
		"--hidden", fmt.Sprint(m.Hidden), "--dropout", string(m.Dropout), "--lr", string(tr.LearningRate),
		"--weight-decay", string(tr.WeightDecay), "--epochs", fmt.Sprint(tr.Epochs), "--staleness", tr.Staleness.String(),
		"--graph-servers", fmt.Sprint(job.Spec.GraphServers.Replicas), "--param-servers", fmt.Sprint(job.Spec.ParameterServers.Replicas)}
	if m.Heads != nil {
		args = append(args, "--heads", fmt.Sprint(*m.Heads), "--patience", "0")
	}
	if tr.Intervals != nil {
		args = append(args, "--intervals", fmt.Sprint(*tr.Intervals))
	}
	return args
}

// TestCoraCPU is the user's path: kubectl apply the cpu sample, kubectl wait
// for Succeeded, read the accuracy and the printer columns, delete the job.
func TestCoraCPU(t *testing.T) {
	t.Parallel()
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

	jobAccuracy(t, c, name, singleProcessAccuracy(t))
	// The graph servers' peak memory, as the kubelet's processes report it: a Cora graph
	// server holds tens of MiB.
	if m := getJob(context.Background(), t, c, name).Status.Progress.GraphServerPeakMemory; m == nil || m.Value() < 16<<20 || m.Value() > 2<<30 {
		t.Errorf("status.progress.graphServerPeakMemory %v: want a Cora graph server's peak resident memory, 16 MiB to 2 GiB", m)
	}

	table := run(t, kubectl, "get", "-n", ns, "gnnjob", name, "-o", "wide")
	t.Logf("kubectl get gnnjob -o wide:\n%s", table)
	for _, col := range []string{"EPOCH", "VAL-ACC", "COST-USD", "GS-PEAK-MEM"} {
		if !strings.Contains(table, col) {
			t.Errorf("kubectl get gnnjob -o wide has no %s column:\n%s", col, table)
		}
	}
	deleteJob(t, name, tl.processes())
}

// TestCoraGATCPU runs the GAT sample (synchronous, 2 graph servers): its
// accuracy must match `dorylus train` with the same graph and parameter
// servers, which cut the graph and draw dropout masks the same way.
func TestCoraGATCPU(t *testing.T) {
	t.Parallel()
	const name = "cora-gat-cpu"
	c := setup(t, name)
	runSample(t, c, "cpu_cora_gat.yaml", name, nil, 600*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) float64 {
		return trainAccuracy(t, trainArgs(job, "cora")...)
	})
}

// TestCoraSAGECPU runs the GCN sample as a GraphSAGE network, synchronous
// and for all its epochs: its accuracy must match `dorylus train --model
// sage` with the same graph and parameter servers.
func TestCoraSAGECPU(t *testing.T) {
	t.Parallel()
	const name = "cora-sage-cpu"
	c := setup(t, name)
	runSample(t, c, "cpu_cora.yaml", name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Model.Architecture = dorylusv1alpha1.ArchitectureSAGE
		j.Spec.Training.Staleness = intstr.FromString("sync")
		j.Spec.Training.TargetAccuracy = nil
	}, 600*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) float64 {
		return trainAccuracy(t, trainArgs(job, "cora")...)
	})
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
