//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TestJobsThatCannotStart applies three jobs whose pods cannot start on this
// node: one asks for more CPU than the node has (the scheduler refuses it),
// one mounts a Secret that does not exist (the kubelet cannot mount it), one
// runs an image nobody serves (a registry on loopback that refuses
// connections, so nothing leaves the machine). Each must say so in its Ready
// condition, reason PodsCannotStart, naming the cause, within 60 s.
func TestJobsThatCannotStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cause string
		edit        func(*dorylusv1alpha1.GNNTrainingJob)
	}{
		{"cannot-schedule", "Insufficient cpu", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.GraphServers.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
		}},
		{"missing-secret", `"no-such-secret" not found`, func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Training.Staleness = intstr.FromString("sync")
			j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10, S3: &dorylusv1alpha1.S3Location{
				Bucket: "checkpoints", Region: "us-east-1", Endpoint: "http://127.0.0.1:1",
				SecretRef: &dorylusv1alpha1.SecretReference{Name: "no-such-secret"}}}
		}},
		{"unknown-image", "127.0.0.1:1/dorylus-gnn/no-such-image", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Image = "127.0.0.1:1/dorylus-gnn/no-such-image:0"
		}},
	}
	var names []string
	for _, tc := range cases {
		names = append(names, tc.name)
	}
	c := setup(t, names...)
	applied := map[string]time.Time{}
	for _, tc := range cases {
		_, manifest := sampleJob(t, "cpu_cora.yaml", tc.name, tc.edit)
		applied[tc.name] = time.Now()
		apply(t, manifest)
	}
	for _, tc := range cases { // one after the other, each within 60 s of its apply
		t.Run(tc.name, func(t *testing.T) {
			job := waitJob(t, c, tc.name, "Ready=False PodsCannotStart naming "+tc.cause, time.Until(applied[tc.name].Add(60*time.Second)), func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
				r := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionReady)
				return r != nil && r.Status == "False" && r.Reason == dorylusv1alpha1.ReasonPodsCannotStart && strings.Contains(r.Message, tc.cause), nil
			})
			r := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionReady)
			t.Logf("%.1f s after apply: Ready=False %s: %s", time.Since(applied[tc.name]).Seconds(), r.Reason, r.Message)
		})
	}
}
