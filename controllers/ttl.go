package controllers

import (
	"time"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TTL policy: spec.runPolicy.ttlSecondsAfterFinished after
// status.completionTime, the job is deleted (its children follow through
// owner references). Until then the reconciler requeues at exactly that
// moment, measured on the injected clock.

// ttlExpiry says whether a finished job's TTL has expired and, if not, how
// long until it does. ok is false when no TTL applies.
func ttlExpiry(job *dorylusv1alpha1.GNNTrainingJob, now time.Time) (expired bool, after time.Duration, ok bool) {
	ttl := job.Spec.RunPolicy.TTLSecondsAfterFinished
	done := job.Status.CompletionTime
	if ttl == nil || done == nil || !isFinished(job) {
		return false, 0, false
	}
	at := done.Add(time.Duration(*ttl) * time.Second)
	if !now.Before(at) {
		return true, 0, true
	}
	return false, at.Sub(now), true
}
