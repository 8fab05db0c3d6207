//go:build e2e

// Package e2e drives the user's path on a real one-node cluster
// (hack/local-cluster: kubelet, containerd, runc, CNI, kube-proxy, CoreDNS)
// running the project's own image: helm install the operator chart, kubectl
// apply every sample job in a namespace that enforces Pod Security
// `restricted`, wait for Succeeded, and compare the result with `dorylus
// train`; it also kills a graph server's process and deletes its pod
// mid-training, suspends and resumes a job, and applies jobs that cannot
// start. Run it with `make e2e` (build tag e2e), which starts the cluster
// first and stops it after.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/controllers"
)

var (
	root       = mustAbs("../..")
	clusterDir = envOr("LOCAL_CLUSTER_DIR", filepath.Join(os.Getenv("HOME"), ".cache/dorylus/local-cluster"))
	kubeconfig = filepath.Join(clusterDir, "kubeconfig")
	kubectl    = envOr("KUBECTL", filepath.Join(os.Getenv("HOME"), ".cache/dorylus/k8s-v1.37.2/kubectl"))
	helm       = envOr("HELM", filepath.Join(os.Getenv("HOME"), ".cache/dorylus/bin/helm"))
)

// ns is the namespace the tests' jobs run in, and operatorNS the operator's;
// both enforce Pod Security `restricted`.
const (
	ns         = "dorylus-e2e"
	operatorNS = "dorylus-system"
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
	out, err := runIn(nil, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

// runIn runs a command with stdin (nil: none) and the cluster's kubeconfig.
func runIn(stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	hh := filepath.Join(clusterDir, "helm")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+hh, "HELM_CONFIG_HOME="+hh, "HELM_DATA_HOME="+hh)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

var (
	clientOnce sync.Once
	k8sClient  client.Client
	clientErr  error
)

// cluster returns a client of the local cluster, and installs the operator
// chart the first time (helm upgrade --install, waiting for its Deployment).
func cluster(t *testing.T) client.Client {
	t.Helper()
	clientOnce.Do(func() {
		if _, err := os.Stat(kubeconfig); err != nil {
			clientErr = fmt.Errorf("no local cluster (%v): run make local-cluster", err)
			return
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			clientErr = err
			return
		}
		// Tests run in parallel, each polling its job: client-go's default
		// 5 requests a second would throttle them.
		cfg.QPS, cfg.Burst = 50, 100
		scheme := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			clientErr = err
			return
		}
		if err := dorylusv1alpha1.AddToScheme(scheme); err != nil {
			clientErr = err
			return
		}
		if k8sClient, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			clientErr = err
			return
		}
		if _, err := runIn(restrictedNamespaces(), kubectl, "apply", "-f", "-"); err != nil {
			clientErr = fmt.Errorf("namespaces: %w", err)
			return
		}
		start := time.Now()
		if _, err := runIn(nil, helm, "upgrade", "--install", "dorylus", filepath.Join(root, "charts/dorylus-operator"),
			"--namespace", operatorNS, "--wait", "--timeout", "180s"); err != nil {
			clientErr = fmt.Errorf("helm install: %w", err)
			return
		}
		fmt.Printf("helm upgrade --install --wait: %v\n", time.Since(start).Round(10*time.Millisecond))
	})
	if clientErr != nil {
		dumpCluster(t, time.Time{})
		t.Fatal(clientErr)
	}
	return k8sClient
}

// restrictedNamespaces is the manifest of the operator's and the jobs'
// namespaces, both enforcing Pod Security `restricted`.
func restrictedNamespaces() []byte {
	var b bytes.Buffer
	for _, name := range []string{operatorNS, ns} {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n"+
			"    pod-security.kubernetes.io/enforce: restricted\n    pod-security.kubernetes.io/enforce-version: latest\n---\n", name)
	}
	return b.Bytes()
}

// e2eCPU is the CPU every server of a test job requests.
const e2eCPU = "100m"

// requestCPU sets r's CPU request to cpu. The node's kubelet runs on cgroup
// v1, where the pods that request no CPU (BestEffort) share 2 CPU shares
// between them all, and a pod requesting 100m has 102: while other tests'
// jobs keep both CPUs busy, a server or function without a request gets a
// few per mille of the CPU (the Knative and Lambda samples, whose servers
// request nothing, took seconds an epoch, 20 times longer than alone).
func requestCPU(r *corev1.ResourceRequirements, cpu string) {
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	r.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
}

// sampleJob reads a sample from config/samples, renames it and lets edit
// change it; it returns the job and its YAML.
func sampleJob(t *testing.T, file, name string, edit func(*dorylusv1alpha1.GNNTrainingJob)) (*dorylusv1alpha1.GNNTrainingJob, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "config/samples", file))
	if err != nil {
		t.Fatal(err)
	}
	job := &dorylusv1alpha1.GNNTrainingJob{}
	if err := yaml.UnmarshalStrict(raw, job); err != nil {
		t.Fatalf("config/samples/%s: %v", file, err)
	}
	job.Name, job.Namespace = name, ns
	// The node has 2 CPUs and make e2e runs tests three at a time: every
	// server asks for e2eCPU instead of the sample's request, so that the
	// jobs of a parallel run all fit, and none is BestEffort (requestCPU).
	requestCPU(&job.Spec.GraphServers.Resources, e2eCPU)
	requestCPU(&job.Spec.ParameterServers.Resources, e2eCPU)
	if edit != nil {
		edit(job)
	}
	out, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return job, out
}

// credentialsSecret creates Secret name with the keys a job's S3 and Lambda
// credentials are read from, and deletes it at the end of the test.
func credentialsSecret(t *testing.T, c client.Client, name, accessKeyID, secretAccessKey string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		StringData: map[string]string{"accessKeyID": accessKeyID, "secretAccessKey": secretAccessKey}}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), secret) })
}

// apply runs kubectl apply -f - with manifest.
func apply(t *testing.T, manifest []byte) {
	t.Helper()
	if _, err := runIn(manifest, kubectl, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, manifest)
	}
}

// getJob reads a job; a failed read is reported and gives nil.
func getJob(ctx context.Context, t *testing.T, c client.Client, name string) *dorylusv1alpha1.GNNTrainingJob {
	job := &dorylusv1alpha1.GNNTrainingJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		t.Logf("get gnnjob %s: %v", name, err)
		return nil
	}
	return job
}

// waitJob polls job name until done returns true (or an error, which fails
// the test), or fails the test after timeout naming what it waited for.
func waitJob(t *testing.T, c client.Client, name, what string, timeout time.Duration, done func(*dorylusv1alpha1.GNNTrainingJob) (bool, error)) *dorylusv1alpha1.GNNTrainingJob {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var job *dorylusv1alpha1.GNNTrainingJob
	for {
		if j := getJob(ctx, t, c, name); j != nil {
			job = j
			ok, err := done(job)
			if err != nil {
				t.Fatalf("gnnjob %s, waiting for %s: %v\nconditions: %s", name, what, err, conditions(job))
			}
			if ok {
				return job
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gnnjob %s: no %s after %v; conditions: %s", name, what, timeout, conditions(job))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// conditions formats a job's conditions and progress on one line.
func conditions(job *dorylusv1alpha1.GNNTrainingJob) string {
	if job == nil {
		return "(job not read)"
	}
	var parts []string
	for _, c := range job.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	if p := job.Status.Progress; p != nil {
		parts = append(parts, fmt.Sprintf("epoch %d", p.Epoch))
	}
	parts = append(parts, fmt.Sprintf("restarts %d", job.Status.Restarts))
	return strings.Join(parts, "; ")
}

// finished is a waitJob predicate: the job succeeded. A Failed condition is
// an error.
func succeeded(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
	if c := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionFailed); c != nil && c.Status == "True" {
		return false, fmt.Errorf("the job failed: %s: %s", c.Reason, c.Message)
	}
	return meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSucceeded), nil
}

// atEpoch is a waitJob predicate: graph server 0 reported epoch n or later.
func atEpoch(n int32) func(*dorylusv1alpha1.GNNTrainingJob) (bool, error) {
	return func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if ok, err := succeeded(job); ok || err != nil {
			return false, fmt.Errorf("the job ended before epoch %d (%v)", n, err)
		}
		return job.Status.Progress != nil && job.Status.Progress.Epoch >= n, nil
	}
}

// jobPods lists the pods of job name.
func jobPods(ctx context.Context, c client.Client, name string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{controllers.LabelJobName: name})
	return pods.Items, err
}

// deleteJob deletes a job and waits until its children, its pods and the
// processes pids (recorded while it ran) are gone.
func deleteJob(t *testing.T, name string, pids []int) {
	t.Helper()
	run(t, kubectl, "delete", "-n", ns, "gnnjob/"+name, "--wait", "--timeout=120s")
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := run(t, kubectl, "get", "-n", ns, "pods,statefulsets,deployments,jobs,services,configmaps,serviceaccounts,roles,rolebindings",
			"-l", controllers.LabelJobName+"="+name, "-o", "name")
		var alive []int
		for _, pid := range pids {
			if processAlive(pid) {
				alive = append(alive, pid)
			}
		}
		if strings.TrimSpace(left) == "" && len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after deleting gnnjob %s: children %q, processes %v remain", name, left, alive)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// processAlive reports whether pid is a running dorylus process (not a
// zombie, and not a reused pid of something else).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && s[i+2] == 'Z' {
		return false
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return bytes.Contains(cmdline, []byte("dorylus"))
}

// containerPid is the process id behind a container ID the kubelet
// reported (containerd://ID), which containerd's shim records in the task's
// state folder; 0 when unknown.
func containerPid(id string) int {
	var pid int
	cid, ok := strings.CutPrefix(id, "containerd://")
	if !ok {
		return 0
	}
	raw, err := os.ReadFile(filepath.Join(clusterDir, "containerd/state/io.containerd.runtime.v2.task/k8s.io", cid, "init.pid"))
	if err != nil {
		return 0
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(string(raw)), "%d", &pid); err != nil {
		return 0
	}
	return pid
}

// setup returns the cluster's client for a test that runs the jobs named
// jobs: it deletes what an earlier run left of them now, deletes them again
// when the test ends and, if the test failed, first saves the cluster's state
// and logs since the test started (dumpCluster).
func setup(t *testing.T, jobs ...string) client.Client {
	t.Helper()
	started := time.Now()
	c := cluster(t)
	for _, name := range jobs {
		run(t, kubectl, "delete", "-n", ns, "gnnjob/"+name, "--ignore-not-found", "--wait", "--timeout=120s")
	}
	t.Cleanup(func() {
		for _, name := range jobs {
			_, _ = runIn(nil, kubectl, "delete", "-n", ns, "gnnjob/"+name, "--ignore-not-found", "--wait", "--timeout=120s")
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, started)
		}
	})
	return c
}

// dumpCluster writes the jobs' conditions, the events, the pods and the last
// log lines of the containers (written since since), of the kubelet and of
// containerd to failures/TEST.log in the cluster's directory, which outlives
// the cluster, and logs the jobs and that file's path: the test's own failure
// stays the last thing it prints.
func dumpCluster(t *testing.T, since time.Time) {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "gnnjob", "-A", "-o", "wide"},
		{"get", "gnnjob", "-A", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status}{\"\\n\"}{end}"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"get", "pods", "-A", "-o", "wide"},
	} {
		out, err := runIn(nil, kubectl, args...)
		fmt.Fprintf(&b, "kubectl %s:\n%s%v\n", strings.Join(args, " "), out, err)
	}
	// The kubelet's container logs (podLogsDir).
	all, _ := filepath.Glob(filepath.Join(clusterDir, "pod-logs/*/*/*.log"))
	var logs []string
	for _, l := range all {
		if !modTime(l).Before(since) || strings.Contains(l, operatorNS+"_") {
			logs = append(logs, l)
		}
	}
	sort.Slice(logs, func(i, j int) bool { return modTime(logs[i]).Before(modTime(logs[j])) })
	for _, l := range []string{"logs/kubelet.log", "logs/containerd.log"} {
		if _, err := os.Stat(filepath.Join(clusterDir, l)); err == nil {
			logs = append(logs, filepath.Join(clusterDir, l))
		}
	}
	for _, l := range logs {
		raw, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		fmt.Fprintf(&b, "last lines of %s:\n%s\n", l, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	path := filepath.Join(clusterDir, "failures", strings.ReplaceAll(t.Name(), "/", "_")+".log")
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(b.String()), 0o644)
	}
	jobs, _ := runIn(nil, kubectl, "get", "gnnjob", "-A", "-o", "wide")
	t.Logf("jobs:\n%sthe cluster's state and logs: %s %v", jobs, path, err)
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}
