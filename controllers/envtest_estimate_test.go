package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestEstimateInStatus follows a job's completion estimate on the fake clock:
// the first report of the run is where the rate is measured from, a later one
// gives the end (kubectl's ETA column) and a training job is reconciled every
// etaRefresh; graph server 0's reports leave the operator's estimate alone, a
// deadline set on the way bounds it, and it is gone once the job succeeds.
func TestEstimateInStatus(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "eta", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Training.Epochs = 100 }))
	waitCondition(t, ns, "eta", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	setStatefulSetReady(t, ns, "eta-gs", 1)
	setDeploymentAvailable(t, ns, "eta-ps-0")
	job := waitCondition(t, ns, "eta", dorylusv1alpha1.ConditionTraining, metav1.ConditionTrue, "")
	start := job.Status.StartTime.Time
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	estimate := func() *dorylusv1alpha1.CompletionEstimate {
		t.Helper()
		p := getJob(t, ns, "eta").Status.Progress
		if p == nil {
			t.Fatal("no progress")
		}
		return p.Estimate
	}

	reportAt(t, ns, "eta", 10, at(60))
	fakeClock.SetTime(at(61))
	if res := reconcileNow(t, ns, "eta"); res.RequeueAfter != etaRefresh {
		t.Errorf("a training job requeues after %v, want %v to refresh its estimate", res.RequeueAfter, etaRefresh)
	}
	since := &dorylusv1alpha1.CompletionEstimate{SinceEpoch: 10, SinceTime: metav1.NewTime(at(60))}
	if diff := cmp.Diff(since, estimate()); diff != "" {
		t.Errorf("after the first report (-want +got):\n%s", diff)
	}

	reportAt(t, ns, "eta", 30, at(100)) // 2 s an epoch, 70 epochs left
	fakeClock.SetTime(at(101))
	reconcileNow(t, ns, "eta")
	want := since.DeepCopy()
	want.EpochSeconds, want.CompletionTime, want.Reason = ptr.To[dorylusv1alpha1.Decimal]("2"), ptr.To(metav1.NewTime(at(240))), dorylusv1alpha1.ReasonEpochsCompleted
	if diff := cmp.Diff(want, estimate()); diff != "" {
		t.Errorf("after epoch 30 (-want +got):\n%s", diff)
	}
	table, err := readTable(ns)
	if err != nil {
		t.Fatal(err)
	}
	eta := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "ETA" {
			eta = i
		}
	}
	if eta < 0 || len(table.Rows) != 1 || table.Rows[0].Cells[eta] != at(240).UTC().Format(time.RFC3339) {
		t.Errorf("ETA column %d of rows %v, want %s", eta, table.Rows, at(240).UTC().Format(time.RFC3339))
	}

	reportAt(t, ns, "eta", 31, at(102))
	if p := getJob(t, ns, "eta").Status.Progress; p.Epoch != 31 || !cmp.Equal(want, p.Estimate) {
		t.Errorf("after graph server 0's next report: epoch %d, estimate %+v; want 31 and the estimate unchanged", p.Epoch, p.Estimate)
	}

	if err := updateJob(t, ns, "eta", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](200)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deadline bounds the estimate", func() error {
		if e := estimate(); e == nil || e.CompletionTime == nil || !e.CompletionTime.Time.Equal(at(200)) || e.Reason != dorylusv1alpha1.ReasonDeadlineExceeded {
			return fmt.Errorf("with a deadline 200 s after the start: estimate %+v, want it at the deadline, reason DeadlineExceeded", e)
		}
		return nil
	})
	if res := reconcileNow(t, ns, "eta"); res.RequeueAfter != etaRefresh {
		t.Errorf("99 s before the deadline the job requeues after %v, want %v", res.RequeueAfter, etaRefresh)
	}

	report(t, ns, "eta", jobstatus.Progress{Epoch: 100})
	waitCondition(t, ns, "eta", dorylusv1alpha1.ConditionSucceeded, metav1.ConditionTrue, dorylusv1alpha1.ReasonEpochsCompleted)
	eventually(t, "the estimate is removed", func() error {
		if p := getJob(t, ns, "eta").Status.Progress; p.Estimate != nil || p.Epoch != 100 {
			return fmt.Errorf("progress of the finished job: epoch %d, estimate %+v", p.Epoch, p.Estimate)
		}
		return nil
	})
}

// reportAt plays graph server 0 reporting epoch at time at (of the fake
// clock), with its field manager.
func reportAt(t *testing.T, ns, name string, epoch int, at time.Time) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"progress": map[string]any{
		"epoch": int64(epoch), "updateTime": at.UTC().Format(time.RFC3339),
	}}}}
	u.SetGroupVersionKind(dorylusv1alpha1.GroupVersion.WithKind("GNNTrainingJob"))
	u.SetName(name)
	u.SetNamespace(ns)
	if err := k8sClient.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(jobstatus.FieldManager), client.ForceOwnership); err != nil {
		t.Fatalf("report epoch %d: %v", epoch, err)
	}
}
