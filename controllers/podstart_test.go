package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

func pendingPod(conds []corev1.PodCondition, statuses ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "j-gs-0"},
		Status:     corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds, ContainerStatuses: statuses},
	}
}

func waiting(reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "graph-server", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
}

func TestPodStartProblem(t *testing.T) {
	unschedulable := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	running := pendingPod(nil)
	running.Status.Phase = corev1.PodRunning
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		problem  string
		starting bool
	}{
		{"unschedulable", pendingPod(unschedulable), "pod j-gs-0: Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.", false},
		{"image never pulled", pendingPod(nil, waiting("ErrImageNeverPull", `Container image "nope:1" is not present with pull policy of Never`)),
			`pod j-gs-0 container graph-server: ErrImageNeverPull: Container image "nope:1" is not present with pull policy of Never`, false},
		{"missing secret key", pendingPod(nil, waiting("CreateContainerConfigError", `secret "creds" not found`)),
			`pod j-gs-0 container graph-server: CreateContainerConfigError: secret "creds" not found`, false},
		{"creating", pendingPod(nil, waiting("ContainerCreating", "")), "", true},
		{"not yet scheduled", pendingPod(nil), "", true},
		{"crash loop is a restart", pendingPod(nil, waiting("CrashLoopBackOff", "back-off")), "", true},
		{"running", running, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problem, starting := podStartProblem(tc.pod)
			if problem != tc.problem || starting != tc.starting {
				t.Errorf("podStartProblem = %q, %v; want %q, %v", problem, starting, tc.problem, tc.starting)
			}
		})
	}
}

func TestEventProblem(t *testing.T) {
	at := func(s int64) metav1.Time { return metav1.NewTime(time.Unix(s, 0)) }
	evs := []corev1.Event{
		{Type: corev1.EventTypeWarning, Reason: "FailedMount", Message: `MountVolume.SetUp failed for volume "secret-lambda" : secret "old" not found`, LastTimestamp: at(10)},
		{Type: corev1.EventTypeWarning, Reason: "FailedMount", Message: `MountVolume.SetUp failed for volume "secret-lambda" : secret "creds" not found `, LastTimestamp: at(20)},
		{Type: corev1.EventTypeNormal, Reason: "Scheduled", Message: "assigned", LastTimestamp: at(30)},
		{Type: corev1.EventTypeWarning, Reason: "BackOff", Message: "restarting", LastTimestamp: at(40)},
	}
	want := `pod p: FailedMount: MountVolume.SetUp failed for volume "secret-lambda" : secret "creds" not found`
	if got := eventProblem("pod p", evs); got != want {
		t.Errorf("eventProblem = %q, want %q", got, want)
	}
	if got := eventProblem("pod p", evs[2:]); got != "" {
		t.Errorf("eventProblem without a failure = %q, want none", got)
	}
}

func TestReplicaFailure(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "j-ps-0"}, Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: `pods "j-ps-0-x" is forbidden: violates PodSecurity "restricted:latest"`},
	}}}
	want := `deployment j-ps-0: FailedCreate: pods "j-ps-0-x" is forbidden: violates PodSecurity "restricted:latest"`
	if got := replicaFailure(d); got != want {
		t.Errorf("replicaFailure = %q, want %q", got, want)
	}
}

func TestReadyConditionNamesStartProblems(t *testing.T) {
	job := userJob("ns", "j", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.GraphServers.Replicas, j.Spec.ParameterServers.Replicas = 1, 1
	})
	job.Generation = 1
	now := metav1.NewTime(time.Unix(1000, 0))
	st := computeStatus(job, statusInput{now: now, obs: observation{knativeReady: true, startProblems: []string{"pod j-gs-0: Unschedulable: 0/1 nodes are available"}}})
	c := findCond(&dorylusv1alpha1.GNNTrainingJob{Status: st}, dorylusv1alpha1.ConditionReady)
	want := metav1.Condition{Type: dorylusv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: dorylusv1alpha1.ReasonPodsCannotStart,
		ObservedGeneration: 1, LastTransitionTime: now, Message: "graph servers 0/1 ready, parameter servers 0/1 ready; pod j-gs-0: Unschedulable: 0/1 nodes are available"}
	if d := cmp.Diff(want, *c); d != "" {
		t.Errorf("Ready (-want +got):\n%s", d)
	}
}

// TestStartProblemsInStatus: a graph-server pod the scheduler cannot place,
// and one whose Secret volume the kubelet cannot mount, show in the Ready
// condition with the cause, and the condition clears once the pods start.
func TestStartProblemsInStatus(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "stuck"))
	waitCondition(t, ns, "stuck", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck-gs-0", Labels: childLabels(userJob(ns, "stuck"), RoleGraphServer)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "graph-server", Image: testImage}}},
	}
	if err := k8sClient.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	eventually(t, "pod unschedulable", func() error {
		if err := getObj(t, ns, p.Name, p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient cpu."}}
		return k8sClient.Status().Update(ctx, p)
	})
	job := waitCondition(t, ns, "stuck", dorylusv1alpha1.ConditionReady, metav1.ConditionFalse, dorylusv1alpha1.ReasonPodsCannotStart)
	if msg := findCond(job, dorylusv1alpha1.ConditionReady).Message; !strings.Contains(msg, "pod stuck-gs-0: Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.") {
		t.Errorf("Ready message %q does not name the pod and the scheduler's cause", msg)
	}

	// Scheduled, but its Secret volume cannot be mounted: only an event says so.
	eventually(t, "pod creating", func() error {
		if err := getObj(t, ns, p.Name, p); err != nil {
			return err
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("ContainerCreating", "")}
		p.Status.ContainerStatuses[0].Image = testImage
		return k8sClient.Status().Update(ctx, p)
	})
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "stuck-gs-0.mount"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID},
		Type:           corev1.EventTypeWarning, Reason: "FailedMount",
		Message:       `MountVolume.SetUp failed for volume "secret-lambda" : secret "creds" not found`,
		LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "kubelet"},
	}
	if err := k8sClient.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}
	eventually(t, "FailedMount in Ready", func() error {
		c := findCond(getJob(t, ns, "stuck"), dorylusv1alpha1.ConditionReady)
		if c == nil || !strings.Contains(c.Message, `pod stuck-gs-0: FailedMount: MountVolume.SetUp failed for volume "secret-lambda" : secret "creds" not found`) {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})

	// Running: the cause is gone.
	eventually(t, "pod running", func() error {
		if err := getObj(t, ns, p.Name, p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		return k8sClient.Status().Update(ctx, p)
	})
	waitCondition(t, ns, "stuck", dorylusv1alpha1.ConditionReady, metav1.ConditionFalse, dorylusv1alpha1.ReasonServersNotReady)
}
