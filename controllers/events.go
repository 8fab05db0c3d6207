package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// emitEvents records one event per condition whose status changed between
// the written status and the one before it. It runs only after the status
// write succeeded, so no event describes a change that never happened.
func (r *GNNTrainingJobReconciler) emitEvents(job *dorylusv1alpha1.GNNTrainingJob, before, after []metav1.Condition) {
	for _, c := range after {
		old := meta.FindStatusCondition(before, c.Type)
		if old != nil && old.Status == c.Status {
			continue
		}
		if old == nil && c.Status == metav1.ConditionFalse && !warning(c) {
			continue // the initial "not yet" conditions are not news
		}
		kind := corev1.EventTypeNormal
		if warning(c) {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(job, nil, kind, c.Reason, c.Type, "%s", c.Message)
	}
}

// warning reports whether a condition describes trouble.
func warning(c metav1.Condition) bool {
	switch {
	case c.Type == dorylusv1alpha1.ConditionFailed && c.Status == metav1.ConditionTrue:
		return true
	case c.Type == dorylusv1alpha1.ConditionCreated && c.Status == metav1.ConditionFalse:
		return true
	}
	return false
}
