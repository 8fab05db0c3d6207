package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Start policy: a job whose server pods cannot be created, scheduled or
// started says so in its Ready condition (ReasonPodsCannotStart), naming the
// pod and the cause: the scheduler's Unschedulable message, a container's
// waiting reason (ErrImageNeverPull, ImagePullBackOff,
// CreateContainerConfigError, ...), the kubelet's FailedMount event (a
// missing Secret or ConfigMap), or the StatefulSet or ReplicaSet controller's
// failure to create the pod (Pod Security admission, quota). It is a
// condition, not a verdict: the cause may go away (a Secret created, a node
// added), and the job then starts.

// startRecheck is how often a job with pods still starting is looked at
// again, for causes that change no pod (kubelet events).
const startRecheck = 5 * time.Second

// normalWaiting are the waiting reasons of containers that are starting as
// they should; CrashLoopBackOff is a restart, which the backoff limit counts.
var normalWaiting = map[string]bool{"": true, "ContainerCreating": true, "PodInitializing": true, "CrashLoopBackOff": true}

// podStartProblem is why pod p cannot start, read from its status alone; ""
// when none shows. starting reports a pod that is still pending without a
// known cause (whose events may hold one).
func podStartProblem(p *corev1.Pod) (problem string, starting bool) {
	if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil {
		return "", false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("pod %s: %s: %s", p.Name, c.Reason, c.Message), false
		}
	}
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && !normalWaiting[w.Reason] {
			return fmt.Sprintf("pod %s container %s: %s: %s", p.Name, cs.Name, w.Reason, w.Message), false
		}
	}
	return "", true
}

// eventProblemReasons are the warning events that say why a pod is not
// created (FailedCreate, on its StatefulSet or ReplicaSet) or not started
// (on the pod).
var eventProblemReasons = map[string]bool{"FailedCreate": true, "FailedMount": true, "FailedAttachVolume": true, "FailedCreatePodSandBox": true}

// eventProblem is the newest warning event of eventProblemReasons among
// events, as "what: reason: message"; "" when none.
func eventProblem(what string, events []corev1.Event) string {
	var newest *corev1.Event
	for i := range events {
		e := &events[i]
		if e.Type != corev1.EventTypeWarning || !eventProblemReasons[e.Reason] {
			continue
		}
		if newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return ""
	}
	return fmt.Sprintf("%s: %s: %s", what, newest.Reason, strings.TrimSpace(newest.Message))
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// replicaFailure is the message of a Deployment's ReplicaFailure condition
// (its ReplicaSet could not create a pod); "" when none.
func replicaFailure(d *appsv1.Deployment) string {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("deployment %s: %s: %s", d.Name, c.Reason, c.Message)
		}
	}
	return ""
}

// events lists the events about one object (by UID) through the API reader;
// without one (a test that gives none) it lists nothing.
func (r *GNNTrainingJobReconciler) events(ctx context.Context, ns string, uid string) ([]corev1.Event, error) {
	if r.APIReader == nil {
		return nil, nil
	}
	var list corev1.EventList
	err := r.APIReader.List(ctx, &list, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.uid", uid)})
	return list.Items, err
}

// startProblems reads why the job's server pods cannot start: from the pods'
// status, from the events of pods still pending without a cause, and from
// the StatefulSet's events when it has fewer pods than it wants. starting
// reports pods still pending without a known cause.
func (r *GNNTrainingJobReconciler) startProblems(ctx context.Context, sts *appsv1.StatefulSet, deps []appsv1.Deployment, pods []corev1.Pod) (problems []string, starting bool, err error) {
	for i := range pods {
		p := &pods[i]
		if serverKind(p) == "" {
			continue
		}
		prob, pending := podStartProblem(p)
		if pending {
			evs, err := r.events(ctx, p.Namespace, string(p.UID))
			if err != nil {
				return nil, false, fmt.Errorf("events of pod %s: %w", p.Name, err)
			}
			prob = eventProblem("pod "+p.Name, evs)
			starting = starting || prob == ""
		}
		if prob != "" {
			problems = append(problems, prob)
		}
	}
	if sts != nil && sts.Spec.Replicas != nil && sts.Status.Replicas < *sts.Spec.Replicas {
		evs, err := r.events(ctx, sts.Namespace, string(sts.UID))
		if err != nil {
			return nil, false, fmt.Errorf("events of statefulset %s: %w", sts.Name, err)
		}
		if prob := eventProblem("statefulset "+sts.Name, evs); prob != "" {
			problems = append(problems, prob)
		} else {
			starting = true
		}
	}
	for i := range deps {
		if prob := replicaFailure(&deps[i]); prob != "" {
			problems = append(problems, prob)
		}
	}
	sort.Strings(problems)
	return problems, starting, nil
}

// startProblemMessage is the Ready condition's message for problems.
func startProblemMessage(st dorylusv1alpha1.GNNTrainingJobStatus, problems []string) string {
	return truncate(fmt.Sprintf("graph servers %d/%d ready, parameter servers %d/%d ready; %s",
		st.GraphServers.ReadyReplicas, st.GraphServers.Replicas, st.ParameterServers.ReadyReplicas, st.ParameterServers.Replicas,
		strings.Join(problems, "; ")), 1024)
}
