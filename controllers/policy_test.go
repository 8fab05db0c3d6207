package controllers

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func dec(s string) *dorylusv1alpha1.Decimal { d := dorylusv1alpha1.Decimal(s); return &d }

func TestDecide(t *testing.T) {
	start := metav1.NewTime(t0)
	tests := []struct {
		name string
		job  func(*dorylusv1alpha1.GNNTrainingJob)
		now  time.Time
		want *verdict // message not compared when empty
	}{
		{name: "no progress yet", now: t0},
		{name: "mid-run", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 199}
		}},
		{name: "last epoch", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 200}
		}, want: &verdict{"Succeeded", "EpochsCompleted", "completed 200 of 200 epochs"}},
		{name: "target accuracy", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Training.TargetAccuracy = dec("0.8")
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 40, ValAccuracy: dec("0.812")}
		}, want: &verdict{"Succeeded", "TargetAccuracyReached", "validation accuracy 0.812 reached the target 0.8 at epoch 40"}},
		{name: "below target", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Training.TargetAccuracy = dec("0.8")
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 40, ValAccuracy: dec("0.79")}
		}},
		{name: "last epoch, outputs not yet written", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Output = &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "models"}}}
			j.Spec.Training.TargetAccuracy = dec("0.8")
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 200, ValAccuracy: dec("0.9")}
		}},
		{name: "last epoch, outputs written", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Output = &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "models"}}}
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 200, Outputs: []string{"model.safetensors", "model.json"}}
		}, want: &verdict{"Succeeded", "EpochsCompleted", "completed 200 of 200 epochs"}},
		{name: "inference before its outputs", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Output = &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "preds"}}}
			j.Spec.Inference = &dorylusv1alpha1.InferenceSpec{Model: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "models"}}}
			j.Status.Progress = &dorylusv1alpha1.Progress{}
		}},
		{name: "inference wrote its outputs", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Output = &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "preds"}}}
			j.Spec.Inference = &dorylusv1alpha1.InferenceSpec{Model: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "models"}}}
			j.Status.Progress = &dorylusv1alpha1.Progress{Outputs: []string{"partitions.json", "predict.json"}}
		}, want: &verdict{"Succeeded", "OutputsWritten", "wrote 2 files"}},
		{name: "training error beats the last epoch", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 200, FailureMessage: "NaN loss at epoch 200, layer 1, task AV"}
		}, want: &verdict{"Failed", "TrainingError", "graph server 0 reported: NaN loss at epoch 200, layer 1, task AV"}},
		{name: "a training error of the run before the last restart is over", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Status.LastRestartTime = &metav1.Time{Time: t0}
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 20, FailureMessage: "peer gone", UpdateTime: &metav1.Time{Time: t0}}
		}},
		{name: "a training error since the last restart", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Status.LastRestartTime = &metav1.Time{Time: t0}
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 20, FailureMessage: "NaN loss", UpdateTime: &metav1.Time{Time: t0.Add(time.Second)}}
		}, want: &verdict{"Failed", "TrainingError", "graph server 0 reported: NaN loss"}},
		{name: "one second before the deadline", now: t0.Add(59 * time.Second), job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](60)
		}},
		{name: "at the deadline", now: t0.Add(60 * time.Second), job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](60)
		}, want: &verdict{"Failed", "DeadlineExceeded", "running for longer than spec.runPolicy.activeDeadlineSeconds (60s) since 2026-01-02T03:04:05Z"}},
		{name: "suspended jobs do not run out of time", now: t0.Add(time.Hour), job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](60)
			j.Spec.RunPolicy.Suspend = ptr.To(true)
		}},
		{name: "under budget", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.RunPolicy.BudgetUSD = dec("2.50")
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 3, CostUSD: dec("2.49")}
		}},
		{name: "budget reached", now: t0, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.RunPolicy.BudgetUSD = dec("2.50")
			j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 3, CostUSD: dec("2.5")}
		}, want: &verdict{"Failed", "BudgetExceeded", "cost 2.5 USD reached spec.runPolicy.budgetUSD 2.50"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob()
			if tc.job != nil {
				tc.job(job)
			}
			got := decide(job, &start, tc.now)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(verdict{})); diff != "" {
				t.Errorf("decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTTLExpiry(t *testing.T) {
	finished := func(ttl *int32) *dorylusv1alpha1.GNNTrainingJob {
		return testJob(func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.RunPolicy.TTLSecondsAfterFinished = ttl
			j.Status.CompletionTime = &metav1.Time{Time: t0}
			j.Status.Conditions = []metav1.Condition{{Type: "Succeeded", Status: metav1.ConditionTrue}}
		})
	}
	tests := []struct {
		name        string
		job         *dorylusv1alpha1.GNNTrainingJob
		now         time.Time
		wantExpired bool
		wantAfter   time.Duration
		wantOK      bool
	}{
		{"no ttl", finished(nil), t0.Add(time.Hour), false, 0, false},
		{"not finished", testJob(func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](0)
		}), t0, false, 0, false},
		{"exact requeue", finished(ptr.To[int32](3600)), t0.Add(1234 * time.Second), false, 2366 * time.Second, true},
		{"expires at the instant", finished(ptr.To[int32](3600)), t0.Add(time.Hour), true, 0, true},
		{"zero ttl expires at once", finished(ptr.To[int32](0)), t0, true, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expired, after, ok := ttlExpiry(tc.job, tc.now)
			if expired != tc.wantExpired || after != tc.wantAfter || ok != tc.wantOK {
				t.Errorf("ttlExpiry = %v, %v, %v; want %v, %v, %v", expired, after, ok, tc.wantExpired, tc.wantAfter, tc.wantOK)
			}
		})
	}
}

func TestDeadlineLeftIsExact(t *testing.T) {
	job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](600) })
	start := metav1.NewTime(t0)
	if left, expired := deadlineLeft(job, &start, t0.Add(100*time.Second+250*time.Millisecond)); left != 499*time.Second+750*time.Millisecond || expired {
		t.Errorf("deadlineLeft = %v, %v; want 499.75s, false", left, expired)
	}
	if left, expired := deadlineLeft(job, nil, t0); left != 0 || expired {
		t.Errorf("deadlineLeft before start = %v, %v; want 0, false", left, expired)
	}
}

func TestSuspendedConditionAndStartTime(t *testing.T) {
	now := metav1.NewTime(t0)
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	job := testJob()
	if c := suspendedCondition(job, nil); c.Status != metav1.ConditionFalse || c.Reason != "NotSuspended" {
		t.Errorf("never suspended: %s/%s, want False/NotSuspended", c.Status, c.Reason)
	}
	job.Spec.RunPolicy.Suspend = ptr.To(true)
	if c := suspendedCondition(job, nil); c.Status != metav1.ConditionTrue || c.Reason != "Suspended" {
		t.Errorf("suspended: %s/%s, want True/Suspended", c.Status, c.Reason)
	}
	job.Status.Conditions = []metav1.Condition{{Type: "Suspended", Status: metav1.ConditionTrue, Reason: "Suspended"}}
	job.Status.StartTime = &earlier
	if got := nextStartTime(job, false, now); !got.Equal(&earlier) {
		t.Errorf("start time while suspended = %v, want kept %v", got, earlier)
	}
	job.Spec.RunPolicy.Suspend = ptr.To(false)
	if c := suspendedCondition(job, nil); c.Status != metav1.ConditionFalse || c.Reason != "Resumed" {
		t.Errorf("resumed: %s/%s, want False/Resumed", c.Status, c.Reason)
	}
	if got := nextStartTime(job, true, now); !got.Equal(&now) {
		t.Errorf("start time on resume = %v, want reset to %v", got, now)
	}
}

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(t0)
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: 1, LastTransitionTime: now}
	}
	type row struct{ typ, status, reason string }
	tests := []struct {
		name     string
		job      func(*dorylusv1alpha1.GNNTrainingJob)
		in       statusInput
		want     []row
		wantGS   dorylusv1alpha1.ServerStatus
		wantDone bool
	}{
		{name: "just created", in: statusInput{obs: observation{knativeReady: true}},
			want: []row{{"Created", "True", "ChildrenCreated"}, {"Ready", "False", "ServersNotReady"},
				{"Training", "False", "WaitingForServers"}, {"Suspended", "False", "NotSuspended"}},
			wantGS: dorylusv1alpha1.ServerStatus{Replicas: 1}},
		{name: "all ready", in: statusInput{obs: observation{graphReady: 1, paramReady: 1, knativeReady: true}},
			want: []row{{"Created", "True", "ChildrenCreated"}, {"Ready", "True", "ServersReady"},
				{"Training", "True", "Training"}, {"Suspended", "False", "NotSuspended"}},
			wantGS: dorylusv1alpha1.ServerStatus{Replicas: 1, ReadyReplicas: 1}},
		{name: "apply failed", in: statusInput{obs: observation{graphReady: 1, paramReady: 1, knativeReady: true}, applyErr: errors.New("quota")},
			want: []row{{"Created", "False", "ChildApplyFailed"}, {"Ready", "False", "ServersNotReady"},
				{"Training", "False", "WaitingForServers"}, {"Suspended", "False", "NotSuspended"}},
			wantGS: dorylusv1alpha1.ServerStatus{Replicas: 1, ReadyReplicas: 1}},
		{name: "knative not installed", in: statusInput{obs: observation{graphReady: 1, paramReady: 1, knativeReady: true}, knativeMissing: true},
			want: []row{{"Created", "False", "KnativeNotInstalled"}, {"Ready", "False", "ServersNotReady"},
				{"Training", "False", "WaitingForServers"}, {"Suspended", "False", "NotSuspended"}},
			wantGS: dorylusv1alpha1.ServerStatus{Replicas: 1, ReadyReplicas: 1}},
		{name: "suspended", job: func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) },
			in: statusInput{obs: observation{graphReady: 1, knativeReady: true}},
			want: []row{{"Created", "True", "ChildrenCreated"}, {"Ready", "False", "Suspended"},
				{"Training", "False", "Suspended"}, {"Suspended", "True", "Suspended"}}},
		{name: "succeeds", in: statusInput{obs: observation{graphReady: 1, paramReady: 1, knativeReady: true},
			verdict: &verdict{"Succeeded", "EpochsCompleted", "done"}},
			want: []row{{"Created", "True", "ChildrenCreated"}, {"Ready", "False", "Finished"},
				{"Training", "False", "Finished"}, {"Suspended", "False", "NotSuspended"}, {"Succeeded", "True", "EpochsCompleted"}},
			wantDone: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob()
			if tc.job != nil {
				tc.job(job)
			}
			tc.in.now = now
			st := computeStatus(job, tc.in)
			var want []metav1.Condition
			for _, r := range tc.want {
				want = append(want, cond(r.typ, metav1.ConditionStatus(r.status), r.reason))
			}
			if diff := cmp.Diff(want, st.Conditions, cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".Message"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantGS, st.GraphServers); diff != "" {
				t.Errorf("graph servers (-want +got):\n%s", diff)
			}
			if st.ObservedGeneration != 1 {
				t.Errorf("observedGeneration = %d, want 1", st.ObservedGeneration)
			}
			if done := st.CompletionTime != nil; done != tc.wantDone {
				t.Errorf("completionTime set = %v, want %v", done, tc.wantDone)
			}
		})
	}
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	job := testJob()
	first := computeStatus(job, statusInput{obs: observation{graphReady: 1, paramReady: 1, knativeReady: true}, now: metav1.NewTime(t0)})
	job.Status = first
	again := computeStatus(job, statusInput{obs: observation{graphReady: 1, paramReady: 1, knativeReady: true}, now: metav1.NewTime(t0.Add(time.Minute))})
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("an unchanged world changed the status (-first +again):\n%s", diff)
	}
}
