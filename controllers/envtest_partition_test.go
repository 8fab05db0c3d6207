package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// partitionedJob is a 2-graph-server job whose partitions go to the PVC
// "parts" under cora/.
func partitionedJob(ns, name string) *dorylusv1alpha1.GNNTrainingJob {
	return userJob(ns, name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Dataset.PartitionTo = &dorylusv1alpha1.OutputLocation{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "parts", Path: "cora"}}
		j.Spec.GraphServers.Replicas = 2
	})
}

// TestPartitionStep: a job with spec.dataset.partitionTo first runs the
// partition step, a Job writing to the location read-write, with the servers
// at zero and Ready=False reason Partitioning; once the step reports
// status.partitions of the job's graph-server count, the servers start and
// read their files read-only from parts-2/, and the report stays in the
// status through the operator's writes, and the step's Job is deleted.
func TestPartitionStep(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, partitionedJob(ns, "cut"))
	waitCondition(t, ns, "cut", dorylusv1alpha1.ConditionReady, metav1.ConditionFalse, dorylusv1alpha1.ReasonPartitioning)
	var j batchv1.Job
	eventually(t, "the partition Job", func() error { return getObj(t, ns, "cut-partition", &j) })
	pod := j.Spec.Template.Spec
	c := pod.Containers[0]
	if *j.Spec.BackoffLimit != 0 || pod.RestartPolicy != corev1.RestartPolicyNever || pod.ServiceAccountName != "cut-runtime" ||
		!slices.Equal(c.Args, []string{"partition", "--config", jobconfig.DefaultPath}) || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError ||
		len(j.OwnerReferences) != 1 || j.OwnerReferences[0].Name != "cut" || j.Labels[LabelRole] != RolePartitioner {
		t.Errorf("partition Job: backoffLimit %d, restartPolicy %s, service account %s, args %v, termination message %s, owners %v, labels %v",
			*j.Spec.BackoffLimit, pod.RestartPolicy, pod.ServiceAccountName, c.Args, c.TerminationMessagePolicy, j.OwnerReferences, j.Labels)
	}
	if v, m := volumeOf(pod.Volumes, volumePartitions), mountOf(c.VolumeMounts, volumePartitions); v == nil || v.PersistentVolumeClaim == nil ||
		v.PersistentVolumeClaim.ClaimName != "parts" || v.PersistentVolumeClaim.ReadOnly || m == nil || m.ReadOnly || m.MountPath != jobconfig.PartitionsMountPath {
		t.Errorf("partition Job's partitions volume %+v, mount %+v: want claim parts, read-write at %s", v, m, jobconfig.PartitionsMountPath)
	}
	cfg := runConfigOf(t, ns, "cut")
	if p := cfg.Partitions; p == nil || p.Path != "/data/partitions/cora/parts-2" || p.S3 != nil {
		t.Errorf("run config partitions %+v: want path /data/partitions/cora/parts-2", p)
	}
	waitScaled(t, ns, "cut", 0, 0)

	r, err := jobstatus.New(restConfig, ns, "cut")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReportPartitions(context.Background(), jobstatus.Partitions{Parts: 2, Method: "multilevel", EdgeCut: 0.0521, Ghosts: 311, Balance: 1.03}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "status.partitions", func() error {
		if p := getJob(t, ns, "cut").Status.Partitions; p == nil {
			return fmt.Errorf("none")
		}
		return nil
	})
	waitScaled(t, ns, "cut", 2, 1)
	job := waitCondition(t, ns, "cut", dorylusv1alpha1.ConditionReady, metav1.ConditionFalse, dorylusv1alpha1.ReasonServersNotReady)
	want := dorylusv1alpha1.PartitionsStatus{Parts: 2, Method: "multilevel", EdgeCut: "0.0521", Ghosts: 311, Balance: "1.0300"}
	if p := job.Status.Partitions; p == nil || *p != want || job.Status.GraphServers.Replicas != 2 {
		t.Errorf("status.partitions %+v, graph servers %+v after the operator's writes: want %+v, 2 wanted", p, job.Status.GraphServers, want)
	}
	eventually(t, "the partition Job deleted once its report is in", func() error {
		if err := getObj(t, ns, "cut-partition", &batchv1.Job{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %v, want NotFound", err)
		}
		return nil
	})
	var sts appsv1.StatefulSet
	if err := getObj(t, ns, "cut-gs", &sts); err != nil {
		t.Fatal(err)
	}
	gs := sts.Spec.Template.Spec
	if v, m := volumeOf(gs.Volumes, volumePartitions), mountOf(gs.Containers[0].VolumeMounts, volumePartitions); v == nil || v.PersistentVolumeClaim == nil ||
		v.PersistentVolumeClaim.ClaimName != "parts" || !v.PersistentVolumeClaim.ReadOnly || m == nil || !m.ReadOnly {
		t.Errorf("graph servers' partitions volume %+v, mount %+v: want claim parts, read-only", v, m)
	}
}

// volumeOf returns the volume named name, or nil.
func volumeOf(vs []corev1.Volume, name string) *corev1.Volume {
	if i := slices.IndexFunc(vs, func(v corev1.Volume) bool { return v.Name == name }); i >= 0 {
		return &vs[i]
	}
	return nil
}

// mountOf returns the mount of the volume named name, or nil.
func mountOf(ms []corev1.VolumeMount, name string) *corev1.VolumeMount {
	if i := slices.IndexFunc(ms, func(m corev1.VolumeMount) bool { return m.Name == name }); i >= 0 {
		return &ms[i]
	}
	return nil
}

// TestPartitionStepFails: a failed partition step fails the job with reason
// PartitioningFailed, quoting the Job's condition and its pod's last log
// lines, and the servers never start.
func TestPartitionStepFails(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, partitionedJob(ns, "bad"))
	var j batchv1.Job
	eventually(t, "the partition Job", func() error { return getObj(t, ns, "bad-partition", &j) })
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-partition-x", Labels: childLabels(userJob(ns, "bad"), RolePartitioner)},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: RolePartitioner, Image: testImage}}},
	}
	if err := k8sClient.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: RolePartitioner, Image: testImage, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", Message: "dataset cora: reading\ndorylus: dataset s3://x/y is already cut into partition files: leave spec.dataset.partitionTo unset\n"}}}}
	if err := k8sClient.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	// Play the Job controller.
	now := metav1.Now()
	j.Status = batchv1.JobStatus{StartTime: &now, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}
	if err := k8sClient.Status().Update(context.Background(), &j); err != nil {
		t.Fatal(err)
	}
	job := waitCondition(t, ns, "bad", dorylusv1alpha1.ConditionFailed, metav1.ConditionTrue, dorylusv1alpha1.ReasonPartitioningFailed)
	msg := findCond(job, dorylusv1alpha1.ConditionFailed).Message
	for _, want := range []string{"the partition step (Job bad-partition) failed: Job has reached the specified backoff limit", "is already cut into partition files"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Failed message %q: want %q in it", msg, want)
		}
	}
	if n, err := stsReplicas(t, ns, "bad"); err != nil || n != 0 {
		t.Errorf("graph servers %d (%v), want 0", n, err)
	}
}
