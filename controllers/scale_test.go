package controllers

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TestScale100Jobs (DORYLUS_SCALE_TEST=1) applies 100 GNNTrainingJobs at
// once, measures the time until every one is Created with all its children
// present, then counts, over a steady-state window with nothing changing,
// the operator's write requests and the storage writes (watch events) in the
// namespace. DORYLUS_SCALE_JOBS and DORYLUS_SCALE_WINDOW (seconds) override
// 100 jobs and 60 s.
func TestScale100Jobs(t *testing.T) {
	needEnv(t)
	if os.Getenv("DORYLUS_SCALE_TEST") == "" {
		t.Skip("set DORYLUS_SCALE_TEST=1 to run the 100-job measurement")
	}
	jobs := envInt("DORYLUS_SCALE_JOBS", 100)
	window := time.Duration(envInt("DORYLUS_SCALE_WINDOW", 60)) * time.Second
	ctx := context.Background()
	ns := newNamespace(t)

	writesBefore := operatorWrites.Load()
	start := time.Now()
	var wg sync.WaitGroup
	var createErr atomic.Value
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < jobs; i += 20 {
				if err := k8sClient.Create(ctx, userJob(ns, fmt.Sprintf("job-%03d", i))); err != nil {
					createErr.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := createErr.Load(); err != nil {
		t.Fatalf("create: %v", err)
	}
	applied := time.Since(start)

	var created time.Duration
	deadline := start.Add(5 * time.Minute)
	for {
		missing := missingChildren(t, ns, jobs)
		if missing == "" {
			created = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 min: %s", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
	creationWrites := operatorWrites.Load() - writesBefore

	// Let the last reconciles (triggered by the operator's own writes) drain.
	quiet := operatorWrites.Load()
	for {
		time.Sleep(2 * time.Second)
		if n := operatorWrites.Load(); n == quiet {
			break
		} else {
			quiet = n
		}
	}

	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var storageWrites atomic.Int64
	for _, list := range []client.ObjectList{
		&dorylusv1alpha1.GNNTrainingJobList{}, &appsv1.StatefulSetList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{},
		&corev1.ConfigMapList{}, &corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
	} {
		if err := wc.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		rv := list.(interface{ GetResourceVersion() string }).GetResourceVersion()
		w, err := wc.Watch(wctx, list, client.InNamespace(ns), &client.ListOptions{Raw: rawRV(rv)})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
					storageWrites.Add(1)
				}
			}
		}()
	}
	steadyBefore := operatorWrites.Load()
	time.Sleep(window)
	steadyWrites := operatorWrites.Load() - steadyBefore
	perJobPerMinute := float64(steadyWrites) / float64(jobs) / window.Minutes()

	t.Logf("jobs: %d; create requests sent in %v; all Created with every child present after %v", jobs, applied.Round(time.Millisecond), created.Round(time.Millisecond))
	t.Logf("operator write requests until all Created: %d (%.1f per job)", creationWrites, float64(creationWrites)/float64(jobs))
	t.Logf("steady state over %v: operator write requests %d (%.3f per job per minute), storage writes in the namespace %d",
		window, steadyWrites, perJobPerMinute, storageWrites.Load())
	if created > 30*time.Second {
		t.Errorf("all Created after %v, want under 30s", created)
	}
	if steadyWrites != 0 || storageWrites.Load() != 0 {
		t.Errorf("steady state wrote: %d requests, %d storage writes; want 0", steadyWrites, storageWrites.Load())
	}
}

// missingChildren describes what is still missing for n jobs in ns, or "".
func missingChildren(t *testing.T, ns string, n int) string {
	ctx := context.Background()
	var jobs dorylusv1alpha1.GNNTrainingJobList
	if err := k8sClient.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	createdN := 0
	for i := range jobs.Items {
		if meta.IsStatusConditionTrue(jobs.Items[i].Status.Conditions, dorylusv1alpha1.ConditionCreated) {
			createdN++
		}
	}
	if createdN < n {
		return fmt.Sprintf("%d of %d jobs Created", createdN, n)
	}
	counts := map[string]int{}
	count := func(kind string, list client.ObjectList) {
		if err := k8sClient.List(ctx, list, client.InNamespace(ns)); err == nil {
			counts[kind] = meta.LenList(list)
		}
	}
	count("StatefulSet", &appsv1.StatefulSetList{})
	count("Deployment", &appsv1.DeploymentList{})
	count("Service", &corev1.ServiceList{})
	count("ConfigMap", &corev1.ConfigMapList{})
	count("ServiceAccount", &corev1.ServiceAccountList{})
	count("Role", &rbacv1.RoleList{})
	count("RoleBinding", &rbacv1.RoleBindingList{})
	// Each namespace also holds the default ServiceAccount and the
	// kube-root-ca.crt ConfigMap when controllers run; envtest has none.
	want := map[string]int{"StatefulSet": n, "Deployment": n, "Service": 2 * n, "ConfigMap": n, "ServiceAccount": n, "Role": n, "RoleBinding": n}
	for kind, w := range want {
		if counts[kind] < w {
			return fmt.Sprintf("%d of %d %ss", counts[kind], w, kind)
		}
	}
	return ""
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// rawRV starts a watch at a list's resourceVersion, so that only changes
// after the list are seen.
func rawRV(rv string) *metav1.ListOptions { return &metav1.ListOptions{ResourceVersion: rv} }
