package controllers

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TestPodsMeetRestrictedPodSecurity creates, as a dry run, a pod from every
// pod template the operator builds in a namespace that enforces Pod Security
// "restricted": the API server's PodSecurity admission must admit each. Only
// the graph servers mount a ServiceAccount token (graph server 0 reports;
// config/admission refuses the others' writes).
func TestPodsMeetRestrictedPodSecurity(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restricted-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if err := k8sClient.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	secret := &dorylusv1alpha1.SecretReference{Name: "creds"}
	job := userJob(ns.Name, "psa", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.UID = "0000-psa"
		j.Spec.Dataset = dorylusv1alpha1.DatasetSource{S3: &dorylusv1alpha1.S3Location{Bucket: "graphs", SecretRef: secret}}
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Lambda: &dorylusv1alpha1.LambdaBackend{
			FunctionName: "fn", Region: "us-east-1", MemoryMB: 512, MaxConcurrency: 2,
			Credentials: dorylusv1alpha1.AWSCredentials{SecretRef: secret}}}
		j.Spec.GraphServers.Replicas = 2
		j.Spec.ParameterServers.Replicas = 1
	})
	knative := userJob(ns.Name, "psa-kn", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{Service: &dorylusv1alpha1.KnativeServiceTemplate{}}}
	})
	templates := map[string]any{}
	templates["graph server"] = buildGraphStatefulSet(job, testImage, "h", "p", 2).Spec.Template.Spec
	templates["parameter server"] = buildParamDeployment(job, testImage, "h", "p", 0, 1).Spec.Template.Spec
	ks := buildKnativeService(knative, testImage, "p", true)
	kspec, _, err := unstructured.NestedMap(ks.Object, "spec", "template", "spec")
	if err != nil || kspec == nil {
		t.Fatalf("knative service template spec: %v", err)
	}
	templates["knative function"] = kspec
	for name, tmpl := range templates {
		raw, err := json.Marshal(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "psa-"}}
		if err := json.Unmarshal(raw, &pod.Spec); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, want := ptr.Deref(pod.Spec.AutomountServiceAccountToken, true), name == "graph server"; got != want {
			t.Errorf("%s pod automountServiceAccountToken %v, want %v", name, got, want)
		}
		if err := k8sClient.Create(ctx, pod, client.DryRunAll); err != nil {
			t.Errorf("%s pod refused in a restricted namespace: %v", name, err)
		}
	}
	// The check itself refuses what restricted forbids.
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "psa-"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: testImage}}}}
	if err := k8sClient.Create(ctx, bad, client.DryRunAll); err == nil {
		t.Error("a pod without a security context was admitted: the namespace does not enforce restricted")
	}
}
