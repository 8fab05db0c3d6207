package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TestManagerWatchesOnlyItsNamespaces runs a second manager limited to one
// namespace (--watch-namespaces), as the ServiceAccount of the chart rendered
// with watchNamespaces set to that namespace, bound to exactly the rules that
// rendering grants: it is elected leader in the release's namespace, its cache
// syncs without any cluster-wide grant but the chart's cluster-scoped ones, its
// reconciler applies the children (credentials included) and status of a job
// in its namespace, and it neither sees nor touches the job in another.
func TestManagerWatchesOnlyItsNamespaces(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mine, other, release := newNamespace(t), newNamespace(t), newNamespace(t)
	cfg, err := chartOperator(ctx, k8sClient, restConfig, "scoped-"+mine, release, "--set", "watchNamespaces={"+mine+"}")
	if err != nil {
		t.Fatal(err)
	}
	requests := &requestCounter{}
	mgr, r, err := newTestManager(cfg, requests, release, mine)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scoped manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the scoped manager's cache did not sync with its namespace's grant alone")
	}
	select {
	case <-mgr.Elected():
	case <-time.After(20 * time.Second):
		t.Fatalf("the scoped manager was not elected leader in %s within 20s", release)
	}

	// A job in mine that the suite's manager leaves alone, so that what is
	// written comes from the scoped manager's client and cache.
	job := createJob(t, userJob(mine, "cora", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.ManagedBy = ptr.To("dorylus.dev/scope-test") }))
	createJob(t, userJob(other, "cora"))
	eventually(t, "the scoped manager applies its job's children", func() error {
		job = getJob(t, mine, "cora")
		return r.applyChildren(ctx, job, true, "p")
	})
	if requests.snapshot()[requestKey{namespace: mine, verb: "apply", resource: "statefulsets"}] == 0 {
		t.Errorf("the scoped manager applied no StatefulSet in %s", mine)
	}
	obs, err := r.observe(ctx, job)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	if err := r.writeStatus(ctx, job, computeStatus(job, statusInput{obs: obs, now: metav1.NewTime(fakeClock.Now()).Rfc3339Copy()})); err != nil {
		t.Errorf("write status: %v", err)
	}
	_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: other, Name: "cora"}})
	if want := fmt.Sprintf("unable to get: %s/cora because of unknown namespace for the cache", other); err == nil || err.Error() != want {
		t.Errorf("reconcile a job in another namespace: %v, want %s", err, want)
	}
	var jobs dorylusv1alpha1.GNNTrainingJobList
	if err := mgr.GetCache().List(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || jobs.Items[0].Namespace != mine {
		t.Errorf("the scoped manager's cache holds %d jobs, want only %s/cora", len(jobs.Items), mine)
	}
	// The suite's cluster-wide manager has reconciled the other job by now.
	waitCondition(t, other, "cora", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	for k, n := range requests.snapshot() {
		if k.namespace == other {
			t.Errorf("the scoped manager sent %d %s requests in namespace %s", n, k, other)
		}
	}
}
