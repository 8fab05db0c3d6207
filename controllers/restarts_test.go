package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// serverPod is a pod of role and run whose one container has the
// given state, last state and restart count.
func serverPod(name, role, run string, restarts int32, state, last *corev1.ContainerStateTerminated) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelRole: role, LabelRun: run}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: role, RestartCount: restarts,
			State:                corev1.ContainerState{Terminated: state},
			LastTerminationState: corev1.ContainerState{Terminated: last},
		}}},
	}
}

func ended(reason string, code int32, at time.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, FinishedAt: metav1.NewTime(at)}
}

func TestFirstFailure(t *testing.T) {
	tests := []struct {
		name     string
		pods     []corev1.Pod
		restarts int32
		want     *serverFailure
	}{
		{name: "all running", pods: []corev1.Pod{
			serverPod("j-gs-0", RoleGraphServer, "0", 0, nil, nil),
			serverPod("j-ps-0-x", RoleParamServer, "0", 0, nil, nil),
		}},
		{name: "killed and restarted: the last state says how", pods: []corev1.Pod{
			serverPod("j-gs-0", RoleGraphServer, "0", 0, nil, nil),
			serverPod("j-gs-1", RoleGraphServer, "0", 1, nil, ended("Error", 137, t0.Add(time.Minute))),
		}, want: &serverFailure{killed: true, pod: "j-gs-1", at: metav1.NewTime(t0.Add(time.Minute)),
			message: "graph server pod j-gs-1 container graph-server: Error (exit code 137, signal killed)"}},
		{name: "out of memory, not yet restarted", pods: []corev1.Pod{
			serverPod("j-ps-0-x", RoleParamServer, "0", 0, ended("OOMKilled", 137, t0.Add(time.Minute)), nil),
		}, want: &serverFailure{killed: true, pod: "j-ps-0-x", at: metav1.NewTime(t0.Add(time.Minute)),
			message: "parameter server pod j-ps-0-x container param-server: OOMKilled (exit code 137, signal killed)"}},
		{name: "the first to end is the cause", pods: []corev1.Pod{
			serverPod("j-gs-0", RoleGraphServer, "0", 1, nil, ended("Error", 1, t0.Add(5*time.Second))),
			serverPod("j-gs-1", RoleGraphServer, "0", 1, nil, ended("Error", 137, t0.Add(2*time.Second))),
		}, want: &serverFailure{killed: true, pod: "j-gs-1", at: metav1.NewTime(t0.Add(2 * time.Second)),
			message: "graph server pod j-gs-1 container graph-server: Error (exit code 137, signal killed)"}},
		{name: "in the same second the killed one is the cause", pods: []corev1.Pod{
			serverPod("j-gs-0", RoleGraphServer, "0", 1, nil, ended("Error", 1, t0)),
			serverPod("j-gs-1", RoleGraphServer, "0", 1, nil, ended("Error", 137, t0)),
		}, want: &serverFailure{pod: "j-gs-1", at: metav1.NewTime(t0), killed: true,
			message: "graph server pod j-gs-1 container graph-server: Error (exit code 137, signal killed)"}},
		{name: "pods of an earlier run do not count", restarts: 1, pods: []corev1.Pod{
			serverPod("j-gs-0", RoleGraphServer, "0", 2, nil, ended("Error", 1, t0.Add(-time.Second))),
			serverPod("j-gs-1", RoleGraphServer, "1", 0, nil, nil),
		}},
		{name: "unlabelled pods are of run 0", pods: []corev1.Pod{
			serverPod("j-gs-0", RoleGraphServer, "", 1, nil, ended("Error", 1, t0)),
		}, want: &serverFailure{pod: "j-gs-0", at: metav1.NewTime(t0), message: "graph server pod j-gs-0 container graph-server: Error (exit code 1)"}},
		{name: "the last line of the termination message says why", pods: []corev1.Pod{
			serverPod("j-gs-0", RoleGraphServer, "0", 1, nil, &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, FinishedAt: metav1.NewTime(t0),
				Message: "{\"event\":\"epoch\",\"epoch\":3}\ndorylus: graph server 0: progress to graph server 1: connection reset\n"}),
		}, want: &serverFailure{pod: "j-gs-0", at: metav1.NewTime(t0),
			message: "graph server pod j-gs-0 container graph-server: Error (exit code 1): dorylus: graph server 0: progress to graph server 1: connection reset"}},
		{name: "function pods do not count", pods: []corev1.Pod{
			serverPod("j-fn-x", RoleFunction, "0", 3, nil, ended("Error", 2, t0)),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) { j.Status.Restarts = tc.restarts })
			got := firstFailure(job, tc.pods)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(serverFailure{})); diff != "" {
				t.Errorf("firstFailure (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailureVerdict(t *testing.T) {
	f := &serverFailure{pod: "j-gs-1", message: "graph server pod j-gs-1 container graph-server: OOMKilled (exit code 137, signal killed)"}
	checkpointed := func(restarts int32) *dorylusv1alpha1.GNNTrainingJob {
		return testJob(func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10}
			j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](3)
			j.Status.Restarts = restarts
		})
	}
	tests := []struct {
		name string
		job  *dorylusv1alpha1.GNNTrainingJob
		f    *serverFailure
		want *verdict
	}{
		{name: "no failure", job: testJob(), f: nil},
		{name: "no checkpoints: nothing to resume from", job: testJob(), f: f, want: &verdict{"Failed", "ServerFailed",
			"graph server pod j-gs-1 container graph-server: OOMKilled (exit code 137, signal killed); the job has no spec.checkpoint to resume from"}},
		{name: "checkpoints, restarts left: restart", job: checkpointed(2), f: f},
		{name: "checkpoints, limit used up", job: checkpointed(3), f: f, want: &verdict{"Failed", "BackoffLimitExceeded",
			"graph server pod j-gs-1 container graph-server: OOMKilled (exit code 137, signal killed), after 3 restarts (spec.runPolicy.backoffLimit 3)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, failureVerdict(tc.job, tc.f), cmp.AllowUnexported(verdict{})); diff != "" {
				t.Errorf("failureVerdict (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettling(t *testing.T) {
	ended := func(at time.Time) *serverFailure { return &serverFailure{at: metav1.NewTime(at)} }
	tests := []struct {
		name string
		f    *serverFailure
		want time.Duration
	}{
		{"no failure", nil, 0},
		{"end time unknown: act", &serverFailure{}, 0},
		{"ended in this second: wait for the others", ended(t0), failureSettle + time.Second},
		{"ended in the second before", ended(t0.Add(-time.Second)), failureSettle},
		{"settled", ended(t0.Add(-failureSettle - time.Second)), 0},
		{"long ago", ended(t0.Add(-time.Hour)), 0},
		{"a node's clock ahead waits no longer", ended(t0.Add(time.Hour)), failureSettle + time.Second},
	}
	for _, tc := range tests {
		if got := settling(tc.f, t0); got != tc.want {
			t.Errorf("%s: settling = %v, want %v", tc.name, got, tc.want)
		}
	}
}
