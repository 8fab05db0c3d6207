package main

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// statusView is what the agent knows of a pod, from which podStatus derives
// the status it reports.
type statusView struct {
	uid        types.UID
	podIP      netip.Addr // invalid until the sandbox exists
	hostIP     string
	startTime  *metav1.Time
	sandboxErr string
	policy     corev1.RestartPolicy
	containers []corev1.ContainerStatus
}

// Conditions the agent owns; others (PodScheduled, DisruptionTarget) are
// kept as the API server has them.
var ownConditions = []corev1.PodConditionType{
	corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady,
}

// podStatus is the status of pod given what the agent knows: the phase is
// Pending until a container has started, Running while any runs or will be
// restarted, and Succeeded or Failed once every container has exited for
// good (restartPolicy Never, or OnFailure after exit code 0).
func podStatus(pod *corev1.Pod, v statusView, now metav1.Time) corev1.PodStatus {
	st := *pod.Status.DeepCopy()
	st.HostIP, st.HostIPs = v.hostIP, []corev1.HostIP{{IP: v.hostIP}}
	if v.podIP.IsValid() {
		st.PodIP, st.PodIPs = v.podIP.String(), []corev1.PodIP{{IP: v.podIP.String()}}
	}
	if v.startTime != nil {
		st.StartTime = v.startTime
	}
	st.ContainerStatuses = v.containers
	st.Phase = podPhase(v)

	allReady := len(v.containers) > 0
	for _, c := range v.containers {
		allReady = allReady && c.Ready
	}
	final := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	ready := func(t corev1.PodConditionType) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "not every container is ready"}
		switch {
		case final:
			c.Reason, c.Message = "PodCompleted", ""
		case allReady:
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		return c
	}
	sandbox := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}
	if !v.podIP.IsValid() || v.sandboxErr != "" || final {
		sandbox.Status, sandbox.Message = corev1.ConditionFalse, v.sandboxErr
	}
	conds := []corev1.PodCondition{sandbox, {Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, ready(corev1.ContainersReady), ready(corev1.PodReady)}
	st.Conditions = mergeConditions(st.Conditions, conds, now)
	return st
}

// podPhase is the phase of a pod given its containers' states.
func podPhase(v statusView) corev1.PodPhase {
	running, waitingFresh, failed, done := 0, 0, 0, 0
	for _, c := range v.containers {
		switch {
		case c.State.Running != nil:
			running++
		case c.State.Terminated != nil:
			t := c.State.Terminated
			final := v.policy == corev1.RestartPolicyNever || (v.policy == corev1.RestartPolicyOnFailure && t.ExitCode == 0)
			if !final {
				running++ // it will be restarted
				continue
			}
			done++
			if t.ExitCode != 0 {
				failed++
			}
		case c.RestartCount == 0 && c.LastTerminationState.Terminated == nil:
			waitingFresh++
		default:
			running++ // waiting to restart
		}
	}
	switch {
	case len(v.containers) > 0 && done == len(v.containers) && failed == 0:
		return corev1.PodSucceeded
	case len(v.containers) > 0 && done == len(v.containers):
		return corev1.PodFailed
	case running > 0:
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// mergeConditions replaces the agent's conditions in old by next, keeping a
// condition's lastTransitionTime while its status stays the same.
func mergeConditions(old, next []corev1.PodCondition, now metav1.Time) []corev1.PodCondition {
	var out []corev1.PodCondition
	prev := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range old {
		prev[c.Type] = c
		own := false
		for _, t := range ownConditions {
			own = own || c.Type == t
		}
		if !own {
			out = append(out, c)
		}
	}
	for _, c := range next {
		c.LastTransitionTime = now
		if p, ok := prev[c.Type]; ok && p.Status == c.Status {
			c.LastTransitionTime = p.LastTransitionTime
		}
		c.LastProbeTime = metav1.Time{}
		out = append(out, c)
	}
	return out
}
