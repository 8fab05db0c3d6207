package controllers

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Termination policy: what ends a job, in order of precedence. A training
// error reported by graph server 0 fails the job; reaching the last epoch or
// the target accuracy succeeds it; then the active deadline and the budget
// fail it, and last a server failure the job cannot recover from
// (restarts.go).

// verdict is the terminal condition a job reaches in this reconcile.
type verdict struct {
	conditionType string
	reason        string
	message       string
}

// isFinished reports whether the job has succeeded or failed.
func isFinished(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSucceeded) ||
		meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionFailed)
}

// decide returns the verdict for an unfinished job from its progress and
// its clock, or nil while it should go on. startTime is the (possibly just
// set) start of the current active period.
func decide(job *dorylusv1alpha1.GNNTrainingJob, startTime *metav1.Time, now time.Time) *verdict {
	spec, p := &job.Spec, job.Status.Progress
	if p != nil && p.FailureMessage != "" && reportedSince(p, job.Status.LastRestartTime) {
		return &verdict{dorylusv1alpha1.ConditionFailed, dorylusv1alpha1.ReasonTrainingError,
			"graph server 0 reported: " + p.FailureMessage}
	}
	if v := success(spec, p); v != nil && outputsWritten(job) {
		return v
	}
	if _, expired := deadlineLeft(job, startTime, now); expired {
		return &verdict{dorylusv1alpha1.ConditionFailed, dorylusv1alpha1.ReasonDeadlineExceeded,
			fmt.Sprintf("running for longer than spec.runPolicy.activeDeadlineSeconds (%ds) since %s",
				*spec.RunPolicy.ActiveDeadlineSeconds, startTime.UTC().Format(time.RFC3339))}
	}
	if budget := spec.RunPolicy.BudgetUSD; budget != nil && p != nil && p.CostUSD != nil && reached(*p.CostUSD, *budget) {
		return &verdict{dorylusv1alpha1.ConditionFailed, dorylusv1alpha1.ReasonBudgetExceeded,
			fmt.Sprintf("cost %s USD reached spec.runPolicy.budgetUSD %s", *p.CostUSD, *budget)}
	}
	return nil
}

// reportedSince reports whether graph server 0 reported p after the servers
// last restarted (a failure it reported before belongs to the old run).
func reportedSince(p *dorylusv1alpha1.Progress, restart *metav1.Time) bool {
	return restart == nil || p.UpdateTime == nil || p.UpdateTime.After(restart.Time)
}

// success returns the verdict of a job whose work is done: an inference that wrote its
// outputs, training through the last epoch or to the target accuracy; nil otherwise.
func success(spec *dorylusv1alpha1.GNNTrainingJobSpec, p *dorylusv1alpha1.Progress) *verdict {
	switch {
	case p == nil:
		return nil
	case spec.Inference != nil:
		if len(p.Outputs) == 0 {
			return nil
		}
		return &verdict{dorylusv1alpha1.ConditionSucceeded, dorylusv1alpha1.ReasonOutputsWritten, fmt.Sprintf("wrote %d files", len(p.Outputs))}
	case p.Epoch >= spec.Training.Epochs:
		return &verdict{dorylusv1alpha1.ConditionSucceeded, dorylusv1alpha1.ReasonEpochsCompleted,
			fmt.Sprintf("completed %d of %d epochs", p.Epoch, spec.Training.Epochs)}
	}
	if target := spec.Training.TargetAccuracy; target != nil && p.ValAccuracy != nil && reached(*p.ValAccuracy, *target) {
		return &verdict{dorylusv1alpha1.ConditionSucceeded, dorylusv1alpha1.ReasonTargetAccuracyReached,
			fmt.Sprintf("validation accuracy %s reached the target %s at epoch %d", *p.ValAccuracy, *target, p.Epoch)}
	}
	return nil
}

// deadlineLeft is the time left before the active deadline of a running job;
// expired reports that it has passed. Without a deadline, or while the job is
// not running (startTime nil or suspended), it returns 0, false.
func deadlineLeft(job *dorylusv1alpha1.GNNTrainingJob, startTime *metav1.Time, now time.Time) (left time.Duration, expired bool) {
	d := job.Spec.RunPolicy.ActiveDeadlineSeconds
	if d == nil || startTime == nil || isSuspended(job) {
		return 0, false
	}
	at := startTime.Add(time.Duration(*d) * time.Second)
	if !now.Before(at) {
		return 0, true
	}
	return at.Sub(now), false
}

// reached reports value >= threshold for two API decimals; an unparsable
// value never reaches anything.
func reached(value, threshold dorylusv1alpha1.Decimal) bool {
	v, err1 := strconv.ParseFloat(string(value), 64)
	t, err2 := strconv.ParseFloat(string(threshold), 64)
	return err1 == nil && err2 == nil && v >= t
}
