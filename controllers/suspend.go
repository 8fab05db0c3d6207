package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Suspension policy: a suspended job keeps its children (and its progress)
// but runs zero servers; resuming scales them back and resets
// status.startTime, so the active deadline counts only running time since
// the last resume.

// isSuspended reports whether the spec asks for suspension.
func isSuspended(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return job.Spec.RunPolicy.Suspend != nil && *job.Spec.RunPolicy.Suspend
}

// wasSuspended reports whether the last written status says suspended.
func wasSuspended(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSuspended)
}

// heldByQueue is the job as the operator runs it while Kueue has not
// admitted it: suspended.
func heldByQueue(job *dorylusv1alpha1.GNNTrainingJob) *dorylusv1alpha1.GNNTrainingJob {
	held := job.DeepCopy()
	held.Spec.RunPolicy.Suspend = ptr.To(true)
	return held
}

// suspendedCondition is the Suspended condition for the current spec and,
// for a queued job the user has not suspended, Kueue's decision.
func suspendedCondition(job *dorylusv1alpha1.GNNTrainingJob, queue *queueState) metav1.Condition {
	if queue != nil && !queue.userSuspended {
		return queue.suspendedCondition()
	}
	if isSuspended(job) {
		return metav1.Condition{
			Type: dorylusv1alpha1.ConditionSuspended, Status: metav1.ConditionTrue,
			Reason:  dorylusv1alpha1.ReasonSuspended,
			Message: "spec.runPolicy.suspend is true: every server is scaled to zero",
		}
	}
	reason, msg := dorylusv1alpha1.ReasonNotSuspended, "the job has not been suspended"
	if old := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionSuspended); old != nil &&
		(old.Status == metav1.ConditionTrue || old.Reason == dorylusv1alpha1.ReasonResumed) {
		reason, msg = dorylusv1alpha1.ReasonResumed, "the job was resumed after a suspension"
	}
	return metav1.Condition{
		Type: dorylusv1alpha1.ConditionSuspended, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg,
	}
}

// nextStartTime is status.startTime after this reconcile: set when the job
// first runs, reset when it resumes, kept otherwise.
func nextStartTime(job *dorylusv1alpha1.GNNTrainingJob, running bool, now metav1.Time) *metav1.Time {
	old := job.Status.StartTime
	if !running {
		return old
	}
	if old == nil || wasSuspended(job) {
		return &now
	}
	return old
}
