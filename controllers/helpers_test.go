package controllers

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// testJob is a job as the API server stores it after defaulting: builtin
// cora, GCN 2x16, CPU backend, one graph and one parameter server.
func testJob(mutate ...func(*dorylusv1alpha1.GNNTrainingJob)) *dorylusv1alpha1.GNNTrainingJob {
	job := &dorylusv1alpha1.GNNTrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "cora", Namespace: "ml", UID: "uid-1", Generation: 1},
		Spec: dorylusv1alpha1.GNNTrainingJobSpec{
			Dataset: dorylusv1alpha1.DatasetSource{
				Builtin: &dorylusv1alpha1.BuiltinDataset{Name: "cora"},
				Format:  dorylusv1alpha1.DatasetFormatPrepared,
			},
			Model: dorylusv1alpha1.ModelSpec{Architecture: dorylusv1alpha1.ArchitectureGCN, Layers: 2, Hidden: 16, Dropout: "0.5"},
			Training: dorylusv1alpha1.TrainingSpec{
				Epochs: 200, LearningRate: "0.01", WeightDecay: "0.0005", Staleness: intstr.FromInt32(0), Seed: 1,
			},
			GraphServers:     dorylusv1alpha1.GraphServerSpec{Replicas: 1},
			ParameterServers: dorylusv1alpha1.ParameterServerSpec{Replicas: 1},
			TensorBackend:    &dorylusv1alpha1.TensorBackendSpec{CPU: &dorylusv1alpha1.CPUBackend{}},
			RunPolicy:        dorylusv1alpha1.RunPolicy{Suspend: ptr.To(false), BackoffLimit: ptr.To[int32](3)},
		},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

// toTyped converts an apply configuration (or any object) into a typed one
// through JSON, so tests can compare against plain API structs.
func toTyped[T any](t *testing.T, in any) *T {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

// wantOwner is the owner reference every child carries.
func wantOwner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "dorylus.dev/v1alpha1", Kind: "GNNTrainingJob", Name: "cora", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
}

// wantLabels are the labels of a child of role on job "cora".
// wantPodLabels are wantLabels and the run of a server pod of testJob().
func wantPodLabels(role string) map[string]string {
	l := wantLabels(role)
	l["dorylus.dev/run"] = "0"
	return l
}

func wantLabels(role string) map[string]string {
	return map[string]string{
		"dorylus.dev/job-name":         "cora",
		"dorylus.dev/role":             role,
		"app.kubernetes.io/name":       "dorylus",
		"app.kubernetes.io/instance":   "cora",
		"app.kubernetes.io/component":  role,
		"app.kubernetes.io/managed-by": "dorylus-operator",
	}
}
