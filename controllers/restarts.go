package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Restart policy: a server whose container exits or is killed while the job
// runs is a failure of the whole job, since the servers train in lockstep.
// A job with checkpoints recovers: the operator deletes every server pod at
// once, their controllers create new ones, and all resume from the last
// checkpoint; the recovery counts once in status.restarts, however many
// servers the failure took down (a peer's death makes the others exit too).
// A job that has restarted spec.runPolicy.backoffLimit times fails at its
// next failure; a job without checkpoints fails at its first, naming the
// server and how it ended. The operator acts failureSettle after the first
// container ended, so that it names the cause, not a peer that exited
// because of it.

// serverFailure is the first failure among the job's current server pods.
type serverFailure struct {
	// pod is the failed pod's name.
	pod string
	// message says which server failed and how, e.g. "graph server pod
	// j-gs-1 container graph-server: OOMKilled (exit code 137, signal killed)".
	message string
	// at is when its container ended, for choosing the first failure.
	at metav1.Time
	// killed is set when a signal ended it (the kernel's OOM killer
	// included), not an exit of its own: of failures in the same second
	// (the API's precision), the cause rather than a peer that exited
	// because of it.
	killed bool
}

// currentPod reports whether p belongs to the job's current run: not being
// deleted, and labelled with the job's restart count (a pod made before
// runs were labelled is of run 0).
func currentPod(job *dorylusv1alpha1.GNNTrainingJob, p *corev1.Pod) bool {
	run := p.Labels[LabelRun]
	if run == "" {
		run = "0"
	}
	return p.DeletionTimestamp == nil && run == strconv.Itoa(int(job.Status.Restarts))
}

// serverKind names a server pod's role in messages; "" for a pod that is
// not a server (a function).
func serverKind(p *corev1.Pod) string {
	switch p.Labels[LabelRole] {
	case RoleGraphServer:
		return "graph server"
	case RoleParamServer:
		return "parameter server"
	}
	return ""
}

// podFailure is how a server pod's container ended, if it did: a container
// that is terminated now or has restarted. Function pods do not count.
func podFailure(p *corev1.Pod) *serverFailure {
	what := serverKind(p)
	if what == "" {
		return nil
	}
	for _, cs := range p.Status.ContainerStatuses {
		term := cs.State.Terminated
		if term == nil && cs.RestartCount > 0 {
			term = cs.LastTerminationState.Terminated
			if term == nil { // the kubelet lost the old state: say what is known
				term = &corev1.ContainerStateTerminated{Reason: "Restarted"}
			}
		}
		if term == nil {
			continue
		}
		how := term.Reason
		if how == "" {
			how = "Terminated"
		}
		sig := syscall.Signal(term.Signal)
		if sig == 0 && term.ExitCode > 128 && term.ExitCode < 128+65 { // a shell's 128+signal
			sig = syscall.Signal(term.ExitCode - 128)
		}
		detail := fmt.Sprintf("exit code %d", term.ExitCode)
		if sig != 0 {
			detail += ", signal " + sig.String()
		}
		msg := fmt.Sprintf("%s pod %s container %s: %s (%s)", what, p.Name, cs.Name, how, detail)
		if last := lastLine(term.Message); last != "" {
			msg += ": " + truncate(last, 256)
		}
		killed := sig != 0 || term.ExitCode > 128 || term.Reason == "OOMKilled"
		return &serverFailure{pod: p.Name, message: msg, at: term.FinishedAt, killed: killed}
	}
	return nil
}

// lastLine is the last non-empty line of a termination message: with
// FallbackToLogsOnError, the log line of the error a server ended with.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}

// failureMessage is podFailure's message, "" when the pod has not failed.
func failureMessage(p *corev1.Pod) string {
	if f := podFailure(p); f != nil {
		return f.message
	}
	return ""
}

// failureSettle is how long after a server's container ended the operator
// waits before it acts: the peers it takes down end within moments, and the
// kubelet may report theirs first; the wait lets the first to end be named.
const failureSettle = time.Second

// settling is how much longer to wait before acting on f at now (0: act).
// The end time is truncated to the second, so the wait runs from the end of
// that second; an end time in the future (a node's clock ahead) waits
// failureSettle+1s at most.
func settling(f *serverFailure, now time.Time) time.Duration {
	if f == nil || f.at.IsZero() {
		return 0
	}
	wait := failureSettle + time.Second
	return min(max(f.at.Add(wait).Sub(now), 0), wait)
}

// firstFailure is the failure of the job's current server pods that ended
// first (the cause; the others are its consequences), or nil. Of failures in
// the same second a killed server comes first, then the pod name decides.
func firstFailure(job *dorylusv1alpha1.GNNTrainingJob, pods []corev1.Pod) *serverFailure {
	var first *serverFailure
	for i := range pods {
		if !currentPod(job, &pods[i]) {
			continue
		}
		f := podFailure(&pods[i])
		if f != nil && (first == nil || before(f, first)) {
			first = f
		}
	}
	return first
}

// before orders failures: the earlier, then the killed, then by pod name.
func before(a, b *serverFailure) bool {
	switch {
	case !a.at.Equal(&b.at):
		return a.at.Before(&b.at)
	case a.killed != b.killed:
		return a.killed
	}
	return a.pod < b.pod
}

// recoverable reports whether the job can resume after a server failure:
// only from a checkpoint.
func recoverable(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return job.Spec.Checkpoint != nil
}

// failureVerdict is what a server failure makes of the job: nil when it
// restarts, else Failed with the reason.
func failureVerdict(job *dorylusv1alpha1.GNNTrainingJob, f *serverFailure) *verdict {
	switch {
	case f == nil:
		return nil
	case !recoverable(job):
		return &verdict{dorylusv1alpha1.ConditionFailed, dorylusv1alpha1.ReasonServerFailed,
			f.message + "; the job has no spec.checkpoint to resume from"}
	case job.Spec.RunPolicy.BackoffLimit != nil && job.Status.Restarts >= *job.Spec.RunPolicy.BackoffLimit:
		return &verdict{dorylusv1alpha1.ConditionFailed, dorylusv1alpha1.ReasonBackoffLimitExceeded,
			fmt.Sprintf("%s, after %d restarts (spec.runPolicy.backoffLimit %d)", f.message, job.Status.Restarts, *job.Spec.RunPolicy.BackoffLimit)}
	}
	return nil
}

// oldPods are the job's server pods of an earlier run not yet being deleted.
func oldPods(job *dorylusv1alpha1.GNNTrainingJob, pods []corev1.Pod) []*corev1.Pod {
	var old []*corev1.Pod
	for i := range pods {
		if p := &pods[i]; p.DeletionTimestamp == nil && !currentPod(job, p) && serverKind(p) != "" {
			old = append(old, p)
		}
	}
	return old
}

// deleteOldPods deletes pods of an earlier run, so that their controllers
// create new ones from the current template. It runs after the status that
// records the restart is written, once every controller has observed the
// template (else it would make a pod from the earlier one again, to replace
// it later in a second restart): an error leaves pods that a later reconcile
// deletes.
func (r *GNNTrainingJobReconciler) deleteOldPods(ctx context.Context, pods []*corev1.Pod) error {
	var errs []error
	for _, p := range pods {
		uid := p.UID
		if err := r.Delete(ctx, p, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}
