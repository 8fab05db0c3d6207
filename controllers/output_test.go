package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

func TestOutputURIs(t *testing.T) {
	names := []string{"model.safetensors", "partitions.json", "model.json"}
	for _, tc := range []struct {
		name   string
		output *dorylusv1alpha1.OutputSpec
		names  []string
		want   []string
	}{
		{"no output", nil, names, nil},
		{"not written yet", &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "models"}}}, nil, nil},
		{"s3", &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "models", Prefix: "cora/gcn"}}}, names,
			[]string{"s3://models/cora/gcn/model.safetensors", "s3://models/cora/gcn/partitions.json", "s3://models/cora/gcn/model.json"}},
		{"pvc", &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "out", Path: "runs/1"}}}, names[2:],
			[]string{"pvc://out/runs/1/model.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) {
				j.Spec.Output = tc.output
				j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 200, Outputs: tc.names}
			})
			if diff := cmp.Diff(tc.want, computeStatus(job, statusInput{}).Outputs); diff != "" {
				t.Errorf("status.outputs (-want +got):\n%s", diff)
			}
		})
	}
}
