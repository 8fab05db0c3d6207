package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

func TestEstimateCompletion(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	atp := func(s int) *metav1.Time { m := at(s); return &m }
	dec := func(s string) *dorylusv1alpha1.Decimal { return ptr.To(dorylusv1alpha1.Decimal(s)) }
	// The run started at t0; the operator first saw epoch 10, reported at
	// t0+60s; graph server 0 reported epoch 30 at t0+100s: 2 s an epoch, 70
	// epochs of 100 left.
	since := &dorylusv1alpha1.CompletionEstimate{SinceEpoch: 10, SinceTime: at(60)}
	progress := func(epoch int32, reported int, old *dorylusv1alpha1.CompletionEstimate) *dorylusv1alpha1.Progress {
		return &dorylusv1alpha1.Progress{Epoch: epoch, UpdateTime: atp(reported), Estimate: old}
	}
	// spending is epoch 30 at t0+100s having cost cost, the last epoch epochCost.
	spending := func(cost, epochCost *dorylusv1alpha1.Decimal) *dorylusv1alpha1.Progress {
		p := progress(30, 100, since)
		p.CostUSD, p.EpochCostUSD = cost, epochCost
		return p
	}
	forecast := func(end int, reason string) *dorylusv1alpha1.CompletionEstimate {
		return &dorylusv1alpha1.CompletionEstimate{SinceEpoch: 10, SinceTime: at(60), EpochSeconds: dec("2"), CompletionTime: atp(end), Reason: reason}
	}
	tests := []struct {
		name    string
		mutate  func(*dorylusv1alpha1.GNNTrainingJobSpec)
		p       *dorylusv1alpha1.Progress
		restart *metav1.Time
		now     int
		want    *dorylusv1alpha1.CompletionEstimate
	}{
		{name: "no report yet", now: 101},
		{name: "a report without its time", p: &dorylusv1alpha1.Progress{Epoch: 3}, now: 101},
		{name: "an inference", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.Inference = &dorylusv1alpha1.InferenceSpec{}
		}, p: progress(30, 100, since), now: 101},
		{name: "the report is of the run before the restart", p: progress(30, 100, since), restart: atp(105), now: 101},
		{name: "the first report seen is where the rate is measured from", p: progress(10, 60, nil), now: 70, want: since},
		{name: "a restart measures again from the first report after it", p: progress(25, 100, since), restart: atp(90), now: 101,
			want: &dorylusv1alpha1.CompletionEstimate{SinceEpoch: 25, SinceTime: at(100)}},
		{name: "an epoch before the one measured from measures again", p: progress(5, 100, since), now: 101,
			want: &dorylusv1alpha1.CompletionEstimate{SinceEpoch: 5, SinceTime: at(100)}},
		{name: "no epoch since: no rate yet", p: progress(10, 60, since), now: 101, want: since},
		{name: "the last epoch reported: nothing left to forecast", p: progress(100, 100, since), now: 101, want: since},
		{name: "70 epochs at 2 s after the report", p: progress(30, 100, since), now: 101,
			want: forecast(240, dorylusv1alpha1.ReasonEpochsCompleted)},
		{name: "the next report is late: the epoch under way ends now at the earliest", p: progress(30, 100, since), now: 300,
			want: forecast(300+69*2, dorylusv1alpha1.ReasonEpochsCompleted)},
		{name: "the deadline comes first", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](200)
		}, p: progress(30, 100, since), now: 101, want: forecast(200, dorylusv1alpha1.ReasonDeadlineExceeded)},
		{name: "the deadline after the last epoch does not bound it", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](241)
		}, p: progress(30, 100, since), now: 101, want: forecast(240, dorylusv1alpha1.ReasonEpochsCompleted)},
		{name: "the budget is spent 50 epochs on", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.RunPolicy.BudgetUSD = dec("1.5")
		}, p: spending(dec("1.0"), dec("0.01")), now: 101, want: forecast(200, dorylusv1alpha1.ReasonBudgetExceeded)},
		{name: "the budget outlasts the epochs", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.RunPolicy.BudgetUSD = dec("2")
		}, p: spending(dec("1.0"), dec("0.01")), now: 101, want: forecast(240, dorylusv1alpha1.ReasonEpochsCompleted)},
		{name: "a deadline before the budget", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.RunPolicy.BudgetUSD, s.RunPolicy.ActiveDeadlineSeconds = dec("1.5"), ptr.To[int64](150)
		}, p: spending(dec("1.0"), dec("0.01")), now: 101, want: forecast(150, dorylusv1alpha1.ReasonDeadlineExceeded)},
		{name: "a budget without an epoch cost is not forecast", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.RunPolicy.BudgetUSD = dec("1.5")
		}, p: spending(dec("1.0"), nil), now: 101, want: forecast(240, dorylusv1alpha1.ReasonEpochsCompleted)},
		{name: "a forecast within 15 s of the one held is not rewritten",
			p: progress(30, 100, forecast(252, dorylusv1alpha1.ReasonEpochsCompleted)), now: 101,
			want: forecast(252, dorylusv1alpha1.ReasonEpochsCompleted)},
		{name: "a forecast 16 s from the one held is",
			p: progress(30, 100, forecast(256, dorylusv1alpha1.ReasonEpochsCompleted)), now: 101,
			want: forecast(240, dorylusv1alpha1.ReasonEpochsCompleted)},
		{name: "a twentieth of the time left is the slack when more", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.Training.Epochs = 5030 // 10000 s left: ends at t0+10100s
		}, p: progress(30, 100, forecast(10100+490, dorylusv1alpha1.ReasonEpochsCompleted)), now: 101,
			want: forecast(10100+490, dorylusv1alpha1.ReasonEpochsCompleted)},
		{name: "a new reason is rewritten within the slack", mutate: func(s *dorylusv1alpha1.GNNTrainingJobSpec) {
			s.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](239)
		}, p: progress(30, 100, forecast(240, dorylusv1alpha1.ReasonEpochsCompleted)), now: 101,
			want: forecast(239, dorylusv1alpha1.ReasonDeadlineExceeded)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := &dorylusv1alpha1.GNNTrainingJobSpec{Training: dorylusv1alpha1.TrainingSpec{Epochs: 100}}
			if tc.mutate != nil {
				tc.mutate(spec)
			}
			start := at(0)
			got := estimateCompletion(spec, tc.p, &start, tc.restart, t0.Add(time.Duration(tc.now)*time.Second))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("estimate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEstimateFollowsTheRun(t *testing.T) {
	start := metav1.NewTime(t0)
	reported := metav1.NewTime(t0.Add(time.Minute))
	job := &dorylusv1alpha1.GNNTrainingJob{Spec: dorylusv1alpha1.GNNTrainingJobSpec{Training: dorylusv1alpha1.TrainingSpec{Epochs: 100}}}
	job.Status.StartTime = &start
	job.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 10, UpdateTime: &reported}
	in := statusInput{obs: observation{graphReady: 1, paramReady: 1, knativeReady: true}, now: metav1.NewTime(t0.Add(2 * time.Minute))}
	want := &dorylusv1alpha1.CompletionEstimate{SinceEpoch: 10, SinceTime: reported}
	if got := computeStatus(job, in).Progress.Estimate; !cmp.Equal(want, got) {
		t.Errorf("a running job's estimate %+v, want %+v", got, want)
	}
	if job.Status.Progress.Estimate != nil {
		t.Error("computeStatus changed the job's progress")
	}
	job.Status.Progress.Estimate = want
	job.Spec.RunPolicy.Suspend = ptr.To(true)
	if got := computeStatus(job, in).Progress; got.Estimate != nil || got.Epoch != 10 {
		t.Errorf("a suspended job's progress %+v, want epoch 10 and no estimate", got)
	}
	job.Spec.RunPolicy.Suspend = nil
	in.verdict = &verdict{dorylusv1alpha1.ConditionSucceeded, dorylusv1alpha1.ReasonEpochsCompleted, "done"}
	if got := computeStatus(job, in).Progress; got.Estimate != nil || got.Epoch != 10 {
		t.Errorf("a job finishing now: progress %+v, want epoch 10 and no estimate", got)
	}
}
