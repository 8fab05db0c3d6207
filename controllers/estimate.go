package controllers

import (
	"math"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Estimate policy: while a job trains, the operator forecasts its end in
// status.progress.estimate from the epoch rate graph server 0's reports show
// since the first report of the current run it saw (their updateTimes, one
// clock), and the first of the last epoch, the active deadline and the
// budget that will end it. Progress reports wake no reconcile (quiet.go): a
// training job is reconciled every etaRefresh to refresh it, and a forecast
// that moved less than its slack is not rewritten.

// etaRefresh is how often a training job is reconciled to refresh its estimate.
const etaRefresh = 30 * time.Second

// etaSlack is the least change of the forecast end that is written; a
// twentieth of the time left, when that is more, is the most that is not.
const etaSlack = 15 * time.Second

// estimateCompletion is the job's completion estimate at now, given the
// progress and the start and last restart of its current run, for a job
// that is running; old is the estimate the job holds (p.Estimate). It is
// nil without a report of the current run: before the first, after a
// restart, resume or start until graph server 0 reports again, and for an
// inference.
func estimateCompletion(spec *dorylusv1alpha1.GNNTrainingJobSpec, p *dorylusv1alpha1.Progress, start, restart *metav1.Time, now time.Time) *dorylusv1alpha1.CompletionEstimate {
	if p == nil || p.UpdateTime == nil || start == nil || spec.Inference != nil {
		return nil
	}
	runStart := start.Time
	if restart != nil && restart.After(runStart) {
		runStart = restart.Time
	}
	reported := p.UpdateTime.Time
	if reported.Before(runStart) {
		return nil // a report of an earlier run
	}
	old := p.Estimate
	if old == nil || old.SinceTime.Time.Before(runStart) || p.Epoch < old.SinceEpoch {
		return &dorylusv1alpha1.CompletionEstimate{SinceEpoch: p.Epoch, SinceTime: *p.UpdateTime}
	}
	since := dorylusv1alpha1.CompletionEstimate{SinceEpoch: old.SinceEpoch, SinceTime: old.SinceTime}
	done, span := p.Epoch-old.SinceEpoch, reported.Sub(old.SinceTime.Time)
	left := spec.Training.Epochs - p.Epoch
	if done <= 0 || span <= 0 || left <= 0 {
		return &since
	}
	epoch := span / time.Duration(done)
	// after is when the job is k epochs past the last report; an epoch under
	// way for longer than the rate says ends no sooner than now.
	after := func(k int32) time.Time {
		at := reported.Add(time.Duration(k) * epoch)
		if late := now.Add(time.Duration(k-1) * epoch); late.After(at) {
			return late
		}
		return at
	}
	end, reason := after(left), dorylusv1alpha1.ReasonEpochsCompleted
	if k, ok := epochsToBudget(spec.RunPolicy.BudgetUSD, p); ok && k < left {
		end, reason = after(k), dorylusv1alpha1.ReasonBudgetExceeded
	}
	if d := spec.RunPolicy.ActiveDeadlineSeconds; d != nil {
		if deadline := start.Add(time.Duration(*d) * time.Second); deadline.Before(end) {
			end, reason = deadline, dorylusv1alpha1.ReasonDeadlineExceeded
		}
	}
	if old.CompletionTime != nil && old.EpochSeconds != nil && old.Reason == reason {
		slack := max(etaSlack, old.CompletionTime.Sub(now)/20)
		if diff := end.Sub(old.CompletionTime.Time); diff <= slack && diff >= -slack {
			return old.DeepCopy()
		}
	}
	secs := dorylusv1alpha1.Decimal(strconv.FormatFloat(epoch.Seconds(), 'g', 4, 64))
	at := metav1.NewTime(end.Round(time.Second)).Rfc3339Copy()
	since.EpochSeconds, since.CompletionTime, since.Reason = &secs, &at, reason
	return &since
}

// epochsToBudget is how many more epochs, at the cost of the last one, bring
// the reported cost to the budget: the report that fails the job. ok is
// false without a budget, a cost or a positive epoch cost.
func epochsToBudget(budget *dorylusv1alpha1.Decimal, p *dorylusv1alpha1.Progress) (int32, bool) {
	if budget == nil || p.CostUSD == nil || p.EpochCostUSD == nil {
		return 0, false
	}
	b, err1 := strconv.ParseFloat(string(*budget), 64)
	c, err2 := strconv.ParseFloat(string(*p.CostUSD), 64)
	e, err3 := strconv.ParseFloat(string(*p.EpochCostUSD), 64)
	if err1 != nil || err2 != nil || err3 != nil || !(e > 0) {
		return 0, false
	}
	k := math.Ceil((b - c) / e)
	if k > math.MaxInt32 {
		return 0, false
	}
	return max(int32(k), 1), true
}
