package controllers

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestOutputManifests sends manifests with spec.output and spec.inference to the API server:
// the valid ones are accepted, and each invalid one is refused naming the field and the reason.
func TestOutputManifests(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	s3 := obj{"s3": obj{"bucket": "models", "prefix": "cora/gcn", "secretRef": obj{"name": "aws"}}}
	pvc := obj{"pvc": obj{"claimName": "out", "path": "runs/1"}}
	for name, edits := range map[string][]edit{
		"s3 output":              {set("spec.output", s3)},
		"pvc output":             {set("spec.output", pvc)},
		"inference from a model": {set("spec.output", pvc), set("spec.inference", obj{"model": s3})},
	} {
		u := manifest(ns, "job")
		for _, e := range edits {
			e(u)
		}
		if err := k8sClient.Create(ctx, u, client.DryRunAll); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name           string
		edits          []edit
		field, message string
	}{
		{"output with two destinations", []edit{set("spec.output", obj{"s3": obj{"bucket": "m"}, "pvc": obj{"claimName": "c"}})}, "spec.output", "must set exactly one of s3, pvc"},
		{"output without a destination", []edit{set("spec.output", obj{})}, "spec.output", "must set exactly one of s3, pvc"},
		{"output path escapes", []edit{set("spec.output", obj{"pvc": obj{"claimName": "c", "path": "../x"}})}, "spec.output.pvc.path", "must not contain '..'"},
		{"output bucket", []edit{set("spec.output", obj{"s3": obj{"bucket": "Models"}})}, "spec.output.s3.bucket", "should match"},
		{"inference without output", []edit{set("spec.inference", obj{"model": s3})}, "spec.inference", "spec.inference needs spec.output"},
		{"inference model without a location", []edit{set("spec.output", pvc), set("spec.inference", obj{"model": obj{}})},
			"spec.inference.model", "must set exactly one of s3, pvc"},
		{"inference without a model", []edit{set("spec.output", pvc), set("spec.inference", obj{})}, "spec.inference.model", "Required value"},
	} {
		u := manifest(ns, "job")
		for _, e := range tc.edits {
			e(u)
		}
		err := k8sClient.Create(ctx, u, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%s: %v, want a refusal naming %q with %q", tc.name, err, tc.field, tc.message)
		}
	}
}

// TestInferenceJob creates an inference job writing to S3: the spec round-trips field by field,
// the run config holds the model and the output (spec.output.overwrite too) and no parameter servers, none are created;
// once graph server 0 reports the files written, the job succeeds and lists their URIs.
func TestInferenceJob(t *testing.T) {
	ns := newNamespace(t)
	out := &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "preds", Prefix: "cora",
		Endpoint: "http://minio:9000", SecretRef: &dorylusv1alpha1.SecretReference{Name: "aws"}}}, Overwrite: true}
	model := dorylusv1alpha1.OutputLocation{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "models", Path: "cora/gcn"}}
	createJob(t, userJob(ns, "infer", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Output, j.Spec.Inference = out, &dorylusv1alpha1.InferenceSpec{Model: model}
	}))
	job := waitCondition(t, ns, "infer", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	if diff := cmp.Diff(out, job.Spec.Output); diff != "" {
		t.Errorf("spec.output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(model, job.Spec.Inference.Model); diff != "" {
		t.Errorf("spec.inference.model (-want +got):\n%s", diff)
	}
	cfg := runConfigOf(t, ns, "infer")
	wantOut := &jobconfig.Location{S3: &jobconfig.S3{Bucket: "preds", Prefix: "cora", Endpoint: "http://minio:9000", CredentialsDir: "/var/run/secrets/dorylus/output"}}
	if diff := cmp.Diff(wantOut, cfg.Output); diff != "" || !cfg.OverwriteOutput {
		t.Errorf("run config output (overwrite %v, want true) (-want +got):\n%s", cfg.OverwriteOutput, diff)
	}
	if cfg.Inference == nil || cfg.Inference.Model.Path != "/data/model/cora/gcn" || cfg.ParameterServers.Replicas != 0 {
		t.Errorf("run config inference %+v, parameter servers %+v", cfg.Inference, cfg.ParameterServers)
	}
	var deps appsv1.DeploymentList
	if err := k8sClient.List(context.Background(), &deps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 0 {
		t.Errorf("%d Deployments for an inference job, want none (no parameter servers)", len(deps.Items))
	}
	r, err := jobstatus.New(restConfig, ns, "infer")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Report(context.Background(), jobstatus.Progress{TestAccuracy: 0.8, Outputs: []string{"v-uid-1/partitions.json", "predict.json"}}); err != nil {
		t.Fatal(err)
	}
	job = waitCondition(t, ns, "infer", dorylusv1alpha1.ConditionSucceeded, metav1.ConditionTrue, dorylusv1alpha1.ReasonOutputsWritten)
	if diff := cmp.Diff([]string{"s3://preds/cora/v-uid-1/partitions.json", "s3://preds/cora/predict.json"}, job.Status.Outputs); diff != "" {
		t.Errorf("status.outputs (-want +got):\n%s", diff)
	}
}
