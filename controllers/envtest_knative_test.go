package controllers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TestKnativeServiceFitsTheRealSchema creates the managed Knative Service of
// the Knative sample and of a job that sets every pod-template field the
// builder passes on, as a strict server-side dry run against Knative
// Serving's own CRD (testdata/crds, from knative.dev/serving): the API server
// refuses any field the schema lacks, and what it would store equals what
// the builder wrote (nothing pruned). A field Knative's schema does not have
// is refused, so the check can fail.
func TestKnativeServiceFitsTheRealSchema(t *testing.T) {
	ns := newNamespace(t)
	data, err := os.ReadFile(filepath.Join("..", "config", "samples", "knative_citeseer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sample dorylusv1alpha1.GNNTrainingJob
	if err := yaml.UnmarshalStrict(data, &sample); err != nil {
		t.Fatal(err)
	}
	sample.Namespace, sample.UID = ns, "uid-sample"
	var tmpl dorylusv1alpha1.KnativeServiceTemplate
	if err := yaml.UnmarshalStrict([]byte(fullKnativeTemplate), &tmpl); err != nil {
		t.Fatal(err)
	}
	full := userJob(ns, "full", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.UID = "uid-full"
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{Service: &tmpl}}
	})
	for _, job := range []*dorylusv1alpha1.GNNTrainingJob{&sample, full} {
		for _, running := range []bool{true, false} {
			want := buildKnativeService(job, testImage, "p", running)
			got := want.DeepCopy()
			if err := k8sClient.Create(context.Background(), got, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
				t.Errorf("%s (running %v): Knative's CRD refuses the builder's Service: %v", job.Name, running, err)
				continue
			}
			if diff := cmp.Diff(want.Object["spec"], got.Object["spec"]); diff != "" {
				t.Errorf("%s (running %v): the API server would store another spec (-built +stored):\n%s", job.Name, running, diff)
			}
		}
	}

	bad := buildKnativeService(full, testImage, "p", true)
	if err := unstructured.SetNestedField(bad.Object, "node-1", "spec", "template", "spec", "nodeName"); err != nil {
		t.Fatal(err)
	}
	err = k8sClient.Create(context.Background(), bad, client.DryRunAll, client.FieldValidation("Strict"))
	if err == nil || !strings.Contains(err.Error(), "nodeName") {
		t.Errorf("a Service with spec.template.spec.nodeName, which Knative's schema lacks: err %v, want it refused naming the field", err)
	}
}

// fullKnativeTemplate sets every field of a managed function's template.
const fullKnativeTemplate = `
image: fn:2
containerConcurrency: 4
minScale: 1
maxScale: 8
resources:
  requests: {cpu: 500m}
  limits: {memory: 1Gi}
podTemplate:
  metadata:
    labels: {team: ml}
    annotations: {note: x}
  spec:
    serviceAccountName: fn
    imagePullSecrets: [{name: registry}]
    priorityClassName: batch
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [fn]}]}]
    topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {team: ml}}}
    env: [{name: GOGC, value: "200"}]
`
