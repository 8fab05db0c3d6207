package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

func TestBuildWorkload(t *testing.T) {
	job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Labels = map[string]string{LabelQueueName: "gnn"}
		j.Spec.GraphServers.Replicas = 3
		j.Spec.GraphServers.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
		j.Spec.GraphServers.NodeSelector = map[string]string{"pool": "gnn"}
		j.Spec.ParameterServers.Replicas = 2
		j.Spec.ParameterServers.Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}
		j.Spec.RunPolicy.Suspend = ptr.To(true)
	})
	wl, err := buildWorkload(job, &workloadPriority{name: "low", value: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2",
		"kind":       "Workload",
		"metadata": map[string]any{
			"name": "gnntrainingjob-cora", "namespace": "ml",
			"labels": map[string]any{"app.kubernetes.io/managed-by": "dorylus-operator", "dorylus.dev/job-name": "cora"},
			"ownerReferences": []any{map[string]any{"apiVersion": "dorylus.dev/v1alpha1", "kind": "GNNTrainingJob", "name": "cora",
				"uid": "uid-1", "controller": true, "blockOwnerDeletion": true}},
		},
		"spec": map[string]any{
			"queueName":        "gnn",
			"active":           false, // the user suspended the job
			"priorityClassRef": map[string]any{"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "low"},
			"priority":         int64(10),
			"podSets": []any{
				map[string]any{"name": "graph-servers", "count": int64(3), "template": map[string]any{"spec": map[string]any{
					"nodeSelector": map[string]any{"pool": "gnn"},
					"containers":   []any{map[string]any{"name": "graph-server", "resources": map[string]any{"requests": map[string]any{"cpu": "250m"}}}},
				}}},
				map[string]any{"name": "param-servers", "count": int64(2), "template": map[string]any{"spec": map[string]any{
					"tolerations": []any{map[string]any{"key": "spot", "operator": "Exists"}},
					"containers":  []any{map[string]any{"name": "param-server", "resources": map[string]any{}}},
				}}},
			},
		},
	}
	if d := cmp.Diff(want, wl.Object); d != "" {
		t.Errorf("Workload (-want +got):\n%s", d)
	}
}

func TestWithPlacement(t *testing.T) {
	job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.GraphServers.NodeSelector = map[string]string{"pool": "gnn"}
	})
	q := &queueState{admitted: true, placement: map[string]placement{
		PodSetGraphServers: {nodeLabels: map[string]string{"flavor": "spot"}, tolerations: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}},
		PodSetParamServers: {nodeLabels: map[string]string{"flavor": "on-demand"}},
	}}
	got := withPlacement(job, q)
	if d := cmp.Diff(map[string]string{"pool": "gnn", "flavor": "spot"}, got.Spec.GraphServers.NodeSelector); d != "" {
		t.Errorf("graph servers' node selector (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}, got.Spec.GraphServers.Tolerations); d != "" {
		t.Errorf("graph servers' tolerations (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"flavor": "on-demand"}, got.Spec.ParameterServers.NodeSelector); d != "" {
		t.Errorf("parameter servers' node selector (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"pool": "gnn"}, job.Spec.GraphServers.NodeSelector); d != "" || job.Spec.GraphServers.Tolerations != nil {
		t.Errorf("the job itself changed: node selector (-want +got):\n%s tolerations %v", d, job.Spec.GraphServers.Tolerations)
	}
	if withPlacement(job, &queueState{placement: q.placement}) != job {
		t.Error("placement applied to a job that is not admitted")
	}
}

func TestQueueSuspendedCondition(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    queueState
		want metav1.Condition
	}{{
		name: "waiting",
		q:    queueState{workload: "gnntrainingjob-cora", queue: "gnn", pending: "insufficient quota"},
		want: metav1.Condition{Type: "Suspended", Status: "True", Reason: "WaitingForAdmission",
			Message: "waiting for Kueue to admit Workload gnntrainingjob-cora in LocalQueue gnn; every server is scaled to zero: insufficient quota"},
	}, {
		name: "evicted",
		q: queueState{workload: "gnntrainingjob-cora", queue: "gnn", holdsQuota: true,
			evicted: &metav1.Condition{Reason: "Preempted", Message: "Preempted to accommodate a workload"}},
		want: metav1.Condition{Type: "Suspended", Status: "True", Reason: "Evicted",
			Message: "Kueue evicted Workload gnntrainingjob-cora (Preempted: Preempted to accommodate a workload); every server is scaled to zero until it is admitted again in LocalQueue gnn"},
	}, {
		name: "admitted",
		q:    queueState{workload: "gnntrainingjob-cora", queue: "gnn", admitted: true, clusterQueue: "cq"},
		want: metav1.Condition{Type: "Suspended", Status: "False", Reason: "Admitted",
			Message: "Kueue admitted Workload gnntrainingjob-cora in ClusterQueue cq"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.q.suspendedCondition()); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if tc.q.holds() == tc.q.admitted {
				t.Errorf("holds() = %v with admitted %v", tc.q.holds(), tc.q.admitted)
			}
		})
	}
	// The user's suspend speaks for itself.
	job := heldByQueue(testJob(func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) }))
	if c := suspendedCondition(job, &queueState{userSuspended: true}); c.Reason != dorylusv1alpha1.ReasonSuspended {
		t.Errorf("user-suspended queued job: reason %s, want Suspended", c.Reason)
	}
	orig := testJob()
	if held := heldByQueue(orig); !isSuspended(held) || isSuspended(orig) {
		t.Errorf("heldByQueue: held suspended %v, original suspended %v; want true, false", isSuspended(held), isSuspended(orig))
	}
}
