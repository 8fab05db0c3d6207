package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestQuietWhileTraining checks that a training job costs the operator no
// request while nothing changes: a reconcile applies no child, progress
// reports wake no reconcile, a spec change applies only the child it
// changes, and the report of the last epoch still ends the job.
func TestQuietWhileTraining(t *testing.T) {
	ns := newNamespace(t)
	inNs := func(n string) bool { return n == ns }
	createJob(t, userJob(ns, "quiet"))
	waitCondition(t, ns, "quiet", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	setStatefulSetReady(t, ns, "quiet-gs", 1)
	setDeploymentAvailable(t, ns, "quiet-ps-0")
	waitCondition(t, ns, "quiet", dorylusv1alpha1.ConditionTraining, metav1.ConditionTrue, "")
	settle(t, ns)

	before := operatorRequests.snapshot()
	reconcileNow(t, ns, "quiet")
	if d := requestDelta(before, operatorRequests.snapshot(), inNs); len(d) > 0 {
		t.Errorf("a reconcile of a job in steady state sent:%s", formatDelta(d))
	}

	before = operatorRequests.snapshot()
	for epoch := 1; epoch <= 5; epoch++ {
		report(t, ns, "quiet", jobstatus.Progress{Epoch: epoch, Loss: 1 / float64(epoch), ValAccuracy: 0.5, CostUSD: 0.01})
	}
	eventually(t, "the operator's cache holds epoch 5", func() error {
		var cached dorylusv1alpha1.GNNTrainingJob
		if err := direct.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "quiet"}, &cached); err != nil {
			return err
		}
		if p := cached.Status.Progress; p == nil || p.Epoch != 5 {
			return fmt.Errorf("progress %+v", p)
		}
		return nil
	})
	time.Sleep(time.Second)
	if d := requestDelta(before, operatorRequests.snapshot(), inNs); len(d) > 0 {
		t.Errorf("5 progress reports made the operator send:%s", formatDelta(d))
	}

	before = operatorRequests.snapshot()
	if err := updateJob(t, ns, "quiet", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.GraphServers.NodeSelector = map[string]string{"pool": "cpu"}
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node selector reaches the graph servers", func() error {
		var sts appsv1.StatefulSet
		if err := getObj(t, ns, "quiet-gs", &sts); err != nil {
			return err
		}
		if sts.Spec.Template.Spec.NodeSelector["pool"] != "cpu" {
			return fmt.Errorf("node selector %v", sts.Spec.Template.Spec.NodeSelector)
		}
		return nil
	})
	settle(t, ns)
	d := requestDelta(before, operatorRequests.snapshot(), inNs)
	if d["apply statefulsets"] == 0 {
		t.Errorf("the StatefulSet was not applied; sent:%s", formatDelta(d))
	}
	for k := range d {
		verb, resource, _ := strings.Cut(k, " ")
		if verb != "get" && verb != "list" && resource != "statefulsets" && resource != "gnntrainingjobs/status" && resource != "events" {
			t.Errorf("a node selector for the graph servers also sent %q (all:%s)", k, formatDelta(d))
		}
	}

	setStatefulSetReady(t, ns, "quiet-gs", 1)
	report(t, ns, "quiet", jobstatus.Progress{Epoch: 200, ValAccuracy: 0.8})
	waitCondition(t, ns, "quiet", dorylusv1alpha1.ConditionSucceeded, metav1.ConditionTrue, dorylusv1alpha1.ReasonEpochsCompleted)
	waitScaled(t, ns, "quiet", 0, 0)
}

// settle waits until the operator has sent no request in namespace ns for a
// second.
func settle(t *testing.T, ns string) {
	t.Helper()
	inNs := func(n string) bool { return n == ns }
	last := operatorRequests.snapshot()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		now := operatorRequests.snapshot()
		if len(requestDelta(last, now, inNs)) == 0 {
			return
		}
		last = now
	}
	t.Fatalf("the operator still sends requests in %s after a minute", ns)
}
