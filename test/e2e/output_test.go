//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
)

// TestCoraOutputAndInference runs the output sample, which writes the
// trained model and every vertex's outputs to S3 (a real MinIO the pods
// reach on the node's address), then the inference sample on that model
// (graph servers only). Both must succeed and list in status.outputs files
// that are in the bucket; the training job's accuracy must match `dorylus
// train` with its settings, and the inference job's must equal it (the same
// model on the same graph).
func TestCoraOutputAndInference(t *testing.T) {
	t.Parallel()
	const train, infer = "cora-gcn-output", "cora-gcn-inference"
	c := setup(t, train, infer)
	srv, bucket, endpoint := podMinIO(t, c, "models", "s3-credentials") // the Secret the samples name
	toMinIO := func(l *dorylusv1alpha1.OutputLocation) {
		l.S3.Bucket, l.S3.Endpoint, l.S3.Region = bucket, endpoint, minio.Region
	}

	trained := runSample(t, c, "aws/cpu_cora_output.yaml", train, func(j *dorylusv1alpha1.GNNTrainingJob) { toMinIO(&j.Spec.Output.OutputLocation) },
		600*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) float64 { return trainAccuracy(t, trainArgs(job, "cora")...) })
	checkOutputs(t, srv, bucket, trained, "model.safetensors", "model.json")
	acc := string(*trained.Status.Progress.TestAccuracy)

	inferred := runSample(t, c, "aws/inference_cora.yaml", infer, func(j *dorylusv1alpha1.GNNTrainingJob) {
		toMinIO(&j.Spec.Inference.Model)
		toMinIO(&j.Spec.Output.OutputLocation)
	}, 300*time.Second, func(*dorylusv1alpha1.GNNTrainingJob) float64 {
		f, err := strconv.ParseFloat(acc, 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
	checkOutputs(t, srv, bucket, inferred, "predictions")
	if got := string(*inferred.Status.Progress.TestAccuracy); got != acc {
		t.Errorf("inference job's test accuracy %s, the trained model's %s", got, acc)
	}
}

// checkOutputs checks that job's status.outputs names files in bucket, among
// them one containing each of want.
func checkOutputs(t *testing.T, srv *minio.Server, bucket string, job *dorylusv1alpha1.GNNTrainingJob, want ...string) {
	t.Helper()
	t.Logf("gnnjob %s: status.outputs %v", job.Name, job.Status.Outputs)
	for _, w := range want {
		found := false
		for _, uri := range job.Status.Outputs {
			found = found || strings.Contains(uri, w)
		}
		if !found {
			t.Errorf("gnnjob %s: no %s in status.outputs %v", job.Name, w, job.Status.Outputs)
		}
	}
	for _, uri := range job.Status.Outputs {
		key, ok := strings.CutPrefix(uri, "s3://"+bucket+"/")
		if !ok {
			t.Errorf("gnnjob %s: output %s is not in bucket %s", job.Name, uri, bucket)
			continue
		}
		if _, err := srv.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: &key}); err != nil {
			t.Errorf("gnnjob %s: output %s: %v", job.Name, uri, err)
		}
	}
}
