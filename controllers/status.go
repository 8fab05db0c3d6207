package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Status policy: the operator derives every condition from the spec, the
// children's readiness and graph server 0's progress, computes the whole
// status in memory, and writes it once.

// observation is what one reconcile saw of the job's children.
type observation struct {
	// graphReady counts ready graph servers of the current StatefulSet generation.
	graphReady int32
	// paramReady counts available parameter-server shards.
	paramReady int32
	// knativeReady is true when the managed Knative Service reports Ready
	// (always true without one).
	knativeReady bool
	// pods are the job's pods.
	pods []corev1.Pod
	// rolledOut is the run whose pod template every server controller has
	// observed (rolledOutRun), -1 for none.
	rolledOut int
	// failure is the first failure of a server of the current run, if any
	// (restarts.go).
	failure *serverFailure
	// partitionFailure says why the partition step failed, "" unless it did
	// (partition.go).
	partitionFailure string
	// startProblems say why server pods cannot be created, scheduled or
	// started, one line each, sorted (podstart.go).
	startProblems []string
	// starting is set while some server pod is pending without a known cause.
	starting bool
}

// statusInput is everything computeStatus needs besides the job.
type statusInput struct {
	obs observation
	// applyErr is the first error applying children, if any.
	applyErr error
	// knativeMissing is set when a managed Knative Service is wanted but the
	// cluster has no Knative Serving.
	knativeMissing bool
	// verdict is the terminal condition reached in this reconcile, if any.
	verdict *verdict
	// restart is set when this reconcile restarts every server after a
	// failure.
	restart bool
	// now is the reconcile's time, already truncated to the API's precision.
	now metav1.Time
	// queue is Kueue's decision about a queued job; nil when not queued.
	queue *queueState
}

// computeStatus is the job's next status. It is pure: conditions keep their
// lastTransitionTime unless their status changes. Progress is carried over
// untouched (graph server 0 owns it) but for its estimate (estimate.go).
func computeStatus(job *dorylusv1alpha1.GNNTrainingJob, in statusInput) dorylusv1alpha1.GNNTrainingJobStatus {
	old := &job.Status
	st := dorylusv1alpha1.GNNTrainingJobStatus{
		ObservedGeneration: job.Generation,
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
		StartTime:          old.StartTime,
		CompletionTime:     old.CompletionTime,
		Restarts:           old.Restarts,
		LastRestartTime:    old.LastRestartTime,
		Progress:           old.Progress,
		Partitions:         old.Partitions,
		Outputs:            outputURIs(job),
	}
	// active: the job was running when this reconcile began; running: it
	// still is once this reconcile's verdict, if any, applies.
	suspended := isSuspended(job)
	active := !isFinished(job) && !suspended
	finished := isFinished(job) || in.verdict != nil
	running := !finished && !suspended
	if active {
		st.StartTime = nextStartTime(job, true, in.now)
	}
	if in.restart {
		st.Restarts, st.LastRestartTime = old.Restarts+1, &in.now
	}
	if in.verdict != nil && st.CompletionTime == nil {
		st.CompletionTime = &in.now
	}
	if old.Progress != nil {
		st.Progress = old.Progress.DeepCopy()
		st.Progress.Estimate = nil
		if running {
			st.Progress.Estimate = estimateCompletion(&job.Spec, old.Progress, st.StartTime, st.LastRestartTime, in.now.Time)
		}
	}

	gsWant, psWant := int32(0), int32(0)
	waiting := running && partitioning(job) // for the partition step
	if running && !waiting {
		gsWant, psWant = job.Spec.GraphServers.Replicas, paramShards(job)
	}
	st.GraphServers = dorylusv1alpha1.ServerStatus{Replicas: gsWant, ReadyReplicas: min(in.obs.graphReady, gsWant)}
	st.ParameterServers = dorylusv1alpha1.ServerStatus{Replicas: psWant, ReadyReplicas: min(in.obs.paramReady, psWant)}

	set := func(c metav1.Condition) {
		c.ObservedGeneration = job.Generation
		c.LastTransitionTime = in.now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	set(createdCondition(in))
	ready := running && !waiting && in.applyErr == nil && !in.knativeMissing &&
		st.GraphServers.ReadyReplicas == gsWant && st.ParameterServers.ReadyReplicas == psWant && in.obs.knativeReady
	rc := readyCondition(job, st, running, finished, ready, in.obs.knativeReady)
	if rc.Reason == dorylusv1alpha1.ReasonServersNotReady && len(in.obs.startProblems) > 0 {
		rc.Reason, rc.Message = dorylusv1alpha1.ReasonPodsCannotStart, startProblemMessage(st, in.obs.startProblems)
	}
	tc := trainingCondition(running, finished, ready)
	if waiting && in.applyErr == nil {
		rc.Reason = dorylusv1alpha1.ReasonPartitioning
		rc.Message = fmt.Sprintf("the partition step (Job %s) is cutting the dataset into %d partition files; the servers wait", partitionJobName(job), job.Spec.GraphServers.Replicas)
		tc.Reason, tc.Message = rc.Reason, rc.Message
	}
	set(rc)
	set(tc)
	set(suspendedCondition(job, in.queue))
	if v := in.verdict; v != nil {
		set(metav1.Condition{Type: v.conditionType, Status: metav1.ConditionTrue, Reason: v.reason, Message: v.message})
	}
	return st
}

func createdCondition(in statusInput) metav1.Condition {
	c := metav1.Condition{Type: dorylusv1alpha1.ConditionCreated}
	switch {
	case in.knativeMissing:
		c.Status, c.Reason = metav1.ConditionFalse, dorylusv1alpha1.ReasonKnativeNotInstalled
		c.Message = "spec.tensorBackend.knative.service needs Knative Serving (serving.knative.dev/v1 Service), which this cluster does not serve"
	case in.applyErr != nil:
		c.Status, c.Reason = metav1.ConditionFalse, dorylusv1alpha1.ReasonChildApplyFailed
		c.Message = truncate(in.applyErr.Error(), 1024)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, dorylusv1alpha1.ReasonChildrenCreated
		c.Message = "every child object is applied"
	}
	return c
}

func readyCondition(job *dorylusv1alpha1.GNNTrainingJob, st dorylusv1alpha1.GNNTrainingJobStatus, running, finished, ready, knativeReady bool) metav1.Condition {
	c := metav1.Condition{Type: dorylusv1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	switch {
	case finished:
		c.Reason, c.Message = dorylusv1alpha1.ReasonFinished, "the job has finished; servers are scaled to zero"
	case !running:
		c.Reason, c.Message = dorylusv1alpha1.ReasonSuspended, "the job is suspended; servers are scaled to zero"
	case ready:
		c.Status, c.Reason = metav1.ConditionTrue, dorylusv1alpha1.ReasonServersReady
		c.Message = fmt.Sprintf("%d graph servers and %d parameter servers are ready", st.GraphServers.Replicas, st.ParameterServers.Replicas)
	default:
		c.Reason = dorylusv1alpha1.ReasonServersNotReady
		c.Message = fmt.Sprintf("graph servers %d/%d ready, parameter servers %d/%d ready",
			st.GraphServers.ReadyReplicas, st.GraphServers.Replicas, st.ParameterServers.ReadyReplicas, st.ParameterServers.Replicas)
		if job.Spec.Backend().Knative != nil && job.Spec.Backend().Knative.Service != nil && !knativeReady {
			c.Message += ", Knative Service not ready"
		}
	}
	return c
}

func trainingCondition(running, finished, ready bool) metav1.Condition {
	c := metav1.Condition{Type: dorylusv1alpha1.ConditionTraining, Status: metav1.ConditionFalse}
	switch {
	case finished:
		c.Reason, c.Message = dorylusv1alpha1.ReasonFinished, "the job has finished"
	case !running:
		c.Reason, c.Message = dorylusv1alpha1.ReasonSuspended, "the job is suspended"
	case ready:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, dorylusv1alpha1.ReasonTraining, "every server is ready and epochs are running"
	default:
		c.Reason, c.Message = dorylusv1alpha1.ReasonWaitingForServers, "waiting for every server to be ready"
	}
	return c
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
