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
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// maxRequestsPerJobSecond bounds the operator's API requests while every job
// reports progress.
const maxRequestsPerJobSecond = 0.2

// TestScaleProgress (DORYLUS_SCALE_TEST=1) measures the operator at scale. It
// applies 100 GNNTrainingJobs at once and times until every one is Created
// with all its children; brings them all to Training; then plays graph
// server 0 of every job, reporting progress once a second for a minute, and
// counts the operator's API requests by verb over that window (at most
// maxRequestsPerJobSecond per job). It prints the reconcile latency p99 from
// controller-runtime's histogram, and finally reports every job's last epoch
// and waits until all have Succeeded. DORYLUS_SCALE_JOBS and
// DORYLUS_SCALE_WINDOW (seconds) override 100 jobs and 60 s.
func TestScaleProgress(t *testing.T) {
	if os.Getenv("DORYLUS_SCALE_TEST") == "" {
		t.Skip("set DORYLUS_SCALE_TEST=1 to run the 100-job measurement")
	}
	jobs := envInt("DORYLUS_SCALE_JOBS", 100)
	window := time.Duration(envInt("DORYLUS_SCALE_WINDOW", 60)) * time.Second
	ctx := context.Background()
	ns := newNamespace(t)
	inNs := func(n string) bool { return n == ns }
	names := make([]string, jobs)
	for i := range names {
		names[i] = fmt.Sprintf("job-%03d", i)
	}

	start := time.Now()
	reqStart, histStart := operatorRequests.snapshot(), reconcileHistogram(t)
	if err := forEach(names, func(name string) error { return k8sClient.Create(ctx, userJob(ns, name)) }); err != nil {
		t.Fatalf("create: %v", err)
	}
	applied := time.Since(start)
	var created time.Duration
	for deadline := start.Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		missing := missingChildren(t, ns, jobs)
		if missing == "" {
			created = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 min: %s", missing)
		}
	}
	createRequests := requestDelta(reqStart, operatorRequests.snapshot(), inNs)

	// Every job's servers become ready, as their controllers would report.
	for _, name := range names {
		setStatefulSetReady(t, ns, name+"-gs", 1)
		setDeploymentAvailable(t, ns, name+"-ps-0")
	}
	waitAll(t, ns, jobs, dorylusv1alpha1.ConditionTraining, 2*time.Minute)
	settle(t, ns)
	t.Logf("jobs: %d; create requests sent in %v; all Created with every child present after %v; Training after %v",
		jobs, applied.Round(time.Millisecond), created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	t.Logf("operator requests until all Created: %d (%.1f per job), by verb:%s",
		total(createRequests), float64(total(createRequests))/float64(jobs), formatDelta(createRequests))
	histBefore := reconcileHistogram(t)
	t.Logf("reconciles until Training: %d, latency p99 %s", histBefore.count-histStart.count, histBefore.minus(histStart).p99())

	// The window: every job reports a new epoch once a second.
	reporters := make(map[string]*jobstatus.Reporter, jobs)
	for _, name := range names {
		r, err := jobstatus.New(restConfig, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		reporters[name] = r
	}
	reqBefore := operatorRequests.snapshot()
	var reports, failures atomic.Int64
	var lastErr atomic.Value
	wctx, cancel := context.WithTimeout(ctx, window)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			// Spread the reports over the second.
			time.Sleep(time.Duration(i) * time.Second / time.Duration(jobs))
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for epoch := 1; ; epoch++ {
				p := jobstatus.Progress{Epoch: epoch, Loss: 2 / float64(epoch+1), TrainAccuracy: 0.5, ValAccuracy: 0.4,
					TestAccuracy: 0.4, CostUSD: 0.001 * float64(epoch)}
				if err := reporters[name].Report(ctx, p); err != nil {
					failures.Add(1)
					lastErr.Store(err)
				} else {
					reports.Add(1)
				}
				select {
				case <-wctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
	cancel()
	windowRequests := requestDelta(reqBefore, operatorRequests.snapshot(), inNs)
	histAfter := reconcileHistogram(t)
	perJobSecond := float64(total(windowRequests)) / float64(jobs) / window.Seconds()
	t.Logf("window %v: %d progress reports (%.2f per job per second, %d failed); operator requests %d (%.3f per job per second), by verb:%s",
		window, reports.Load(), float64(reports.Load())/float64(jobs)/window.Seconds(), failures.Load(), total(windowRequests), perJobSecond, formatDelta(windowRequests))
	t.Logf("reconciles in the window: %d, latency p99 %s", histAfter.count-histBefore.count, histAfter.minus(histBefore).p99())
	if failures.Load() > 0 {
		t.Errorf("%d progress reports failed, the last: %v", failures.Load(), lastErr.Load())
	}
	// Reports slow down on a loaded machine; half the rate still measures
	// whether progress wakes reconciles.
	if min := int64(float64(jobs) * window.Seconds() / 2); reports.Load() < min {
		t.Errorf("%d progress reports in the window, want at least %d", reports.Load(), min)
	}
	if perJobSecond > maxRequestsPerJobSecond {
		t.Errorf("operator requests per job per second %.3f, want at most %.1f", perJobSecond, maxRequestsPerJobSecond)
	}
	if created > 30*time.Second {
		t.Errorf("all Created after %v, want under 30s", created)
	}

	// A report that ends the job still gets through.
	end := time.Now()
	if err := forEach(names, func(name string) error {
		return reporters[name].Report(ctx, jobstatus.Progress{Epoch: 200, ValAccuracy: 0.8})
	}); err != nil {
		t.Fatalf("report the last epoch: %v", err)
	}
	waitAll(t, ns, jobs, dorylusv1alpha1.ConditionSucceeded, 2*time.Minute)
	t.Logf("all %d jobs Succeeded %v after their last epoch was reported; reconcile latency p99 over the whole test %s",
		jobs, time.Since(end).Round(time.Millisecond), reconcileHistogram(t).minus(histStart).p99())
}

// forEach runs f over names on 20 goroutines and returns one of its errors.
func forEach(names []string, f func(string) error) error {
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := range 20 {
		wg.Go(func() {
			for i := w; i < len(names); i += 20 {
				if err := f(names[i]); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}

// waitAll waits until n jobs in ns have condition typ true.
func waitAll(t *testing.T, ns string, n int, typ string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var list dorylusv1alpha1.GNNTrainingJobList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		got := 0
		for i := range list.Items {
			if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, typ) {
				got++
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d of %d jobs %s", timeout, got, n, typ)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// histogram is a snapshot of controller-runtime's reconcile latency histogram
// for the gnntrainingjob controller: cumulative counts per upper bound.
type histogram struct {
	count  uint64
	bounds []float64
	cum    []uint64
}

// reconcileHistogram reads controller_runtime_reconcile_time_seconds.
func reconcileHistogram(t *testing.T) histogram {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			ours := false
			for _, l := range m.GetLabel() {
				ours = ours || l.GetName() == "controller" && l.GetValue() == "gnntrainingjob"
			}
			if !ours {
				continue
			}
			h := histogram{count: m.GetHistogram().GetSampleCount()}
			for _, b := range m.GetHistogram().GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
				h.cum = append(h.cum, b.GetCumulativeCount())
			}
			return h
		}
	}
	return histogram{}
}

// minus is the histogram of the reconciles between an earlier snapshot and h.
func (h histogram) minus(earlier histogram) histogram {
	out := histogram{count: h.count - earlier.count, bounds: h.bounds, cum: make([]uint64, len(h.cum))}
	for i := range h.cum {
		out.cum[i] = h.cum[i]
		if i < len(earlier.cum) {
			out.cum[i] -= earlier.cum[i]
		}
	}
	return out
}

// p99 estimates the 99th percentile as Prometheus' histogram_quantile does:
// linear within the bucket that holds it.
func (h histogram) p99() string {
	if h.count == 0 {
		return "n/a (no reconciles)"
	}
	rank := 0.99 * float64(h.count)
	lower, below := 0.0, uint64(0)
	for i, c := range h.cum {
		if float64(c) >= rank {
			in := float64(c - below)
			d := time.Duration((lower + (h.bounds[i]-lower)*(rank-float64(below))/in) * float64(time.Second))
			return d.Round(100 * time.Microsecond).String()
		}
		lower, below = h.bounds[i], c
	}
	return fmt.Sprintf("above %v", time.Duration(lower*float64(time.Second)))
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
