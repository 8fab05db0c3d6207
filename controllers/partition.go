package controllers

import (
	"context"
	"fmt"
	"path"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Partition step: a job with spec.dataset.partitionTo cuts its dataset once,
// before any server starts, in a batch Job running `dorylus partition`, which
// writes one file per graph server under parts-N/ of the location and reports
// the cut into status.partitions. The servers stay at zero until that report
// describes their count; a restarted or resumed job finds it there and never
// partitions again. A failed step fails the job, quoting the step's last log
// lines.

const (
	// RolePartitioner labels the partition step's Job and pod.
	RolePartitioner  = "partitioner"
	volumePartitions = "partitions"
	secretPartitions = "partitions"
)

func partitionJobName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Name + "-partition" }

// partitioning reports whether the job waits for its partition step: it has
// spec.dataset.partitionTo and no status.partitions of its graph servers'
// count yet.
func partitioning(job *dorylusv1alpha1.GNNTrainingJob) bool {
	p := job.Status.Partitions
	return job.Spec.Dataset.PartitionTo != nil && (p == nil || p.Parts != job.Spec.GraphServers.Replicas)
}

// resolvePartitions is the run config's partitions location: parts-N/ of
// spec.dataset.partitionTo, N the graph servers, so that jobs of other counts
// keep their own files beside.
func resolvePartitions(job *dorylusv1alpha1.GNNTrainingJob) *jobconfig.Location {
	to := job.Spec.Dataset.PartitionTo
	if to == nil {
		return nil
	}
	l := resolveLocation(to, jobconfig.PartitionsMountPath, secretPartitions)
	sub := fmt.Sprintf("parts-%d", job.Spec.GraphServers.Replicas)
	if l.S3 != nil {
		l.S3.Prefix = path.Join(l.S3.Prefix, sub)
	} else {
		l.Path = path.Join(l.Path, sub)
	}
	return &l
}

// partitionVolumes are the volumes and mounts of spec.dataset.partitionTo:
// read-write for the step, read-only for the graph servers.
func partitionVolumes(job *dorylusv1alpha1.GNNTrainingJob, readOnly bool) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	to := job.Spec.Dataset.PartitionTo
	switch {
	case to == nil:
		return nil, nil
	case to.PVC != nil:
		v, m := pvcVolume(volumePartitions, to.PVC.ClaimName, jobconfig.PartitionsMountPath, readOnly)
		return []*corev1ac.VolumeApplyConfiguration{v}, []*corev1ac.VolumeMountApplyConfiguration{m}
	case to.S3.SecretRef != nil:
		v, m := secretVolume(secretPartitions, to.S3.SecretRef.Name)
		return []*corev1ac.VolumeApplyConfiguration{v}, []*corev1ac.VolumeMountApplyConfiguration{m}
	}
	return nil, nil
}

// datasetVolumes are the volumes and mounts that read spec.dataset.
func datasetVolumes(job *dorylusv1alpha1.GNNTrainingJob) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	var vs []*corev1ac.VolumeApplyConfiguration
	var ms []*corev1ac.VolumeMountApplyConfiguration
	if d := job.Spec.Dataset.PVC; d != nil {
		v, m := pvcVolume(volumeDataset, d.ClaimName, jobconfig.DatasetMountPath, true)
		vs, ms = append(vs, v), append(ms, m)
	}
	if d := job.Spec.Dataset.S3; d != nil && d.SecretRef != nil {
		v, m := secretVolume(secretDataset, d.SecretRef.Name)
		vs, ms = append(vs, v), append(ms, m)
	}
	return vs, ms
}

// buildPartitionJob is the partition step: one pod, never retried (the
// command retries its transfers itself), in the graph servers' service
// account (it reports into the job's status), placement and resources (it
// holds the whole graph while it cuts it).
func buildPartitionJob(job *dorylusv1alpha1.GNNTrainingJob, image string) *batchv1ac.JobApplyConfiguration {
	volumes, mounts := podVolumes(job), podMounts()
	vs, ms := datasetVolumes(job)
	volumes, mounts = append(volumes, vs...), append(mounts, ms...)
	vs, ms = partitionVolumes(job, false)
	volumes, mounts = append(volumes, vs...), append(mounts, ms...)
	container := corev1ac.Container().
		WithName(RolePartitioner).
		WithImage(image).
		WithCommand(jobconfig.Command).
		WithArgs("partition", "--config", jobconfig.DefaultPath).
		WithEnv(commonEnv(job)...).
		WithEnv(templateEnv(job.Spec.GraphServers.PodTemplate)...).
		WithResources(resources(job.Spec.GraphServers.Resources)).
		WithSecurityContext(containerSecurityContext()).
		// Its last log lines say why it failed: the Failed condition quotes them.
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithVolumeMounts(mounts...)
	podSpec := serverPodSpec(job, &job.Spec.GraphServers.ServerPodSpec, true).
		WithRestartPolicy(corev1.RestartPolicyNever).
		WithContainers(container).
		WithVolumes(volumes...)
	labels := childLabels(job, RolePartitioner)
	return batchv1ac.Job(partitionJobName(job), job.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(job)).
		WithSpec(batchv1ac.JobSpec().
			WithBackoffLimit(0).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(podSpec)))
}

// partitionFailure says why the job's partition step failed: its Job's
// Failed condition and its pod's last log line (as podFailure quotes a
// server's); "" while it has not failed. The pod is read through the API
// reader when the cache has no termination message: the cache of pods may not
// yet hold the termination that the Job's Failed condition followed.
func (r *GNNTrainingJobReconciler) partitionFailure(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, pods []corev1.Pod) (string, error) {
	if job.Spec.Dataset.PartitionTo == nil {
		return "", nil
	}
	var j batchv1.Job
	err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: partitionJobName(job)}, &j)
	if apierrors.IsNotFound(err) || (err == nil && !ownedBy(j.OwnerReferences, job)) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, c := range j.Status.Conditions {
		if c.Type != batchv1.JobFailed || c.Status != corev1.ConditionTrue {
			continue
		}
		msg := fmt.Sprintf("the partition step (Job %s) failed: %s", j.Name, c.Message)
		why := partitionerMessage(pods)
		if why == "" && r.APIReader != nil {
			var fresh corev1.PodList
			if err := r.APIReader.List(ctx, &fresh, client.InNamespace(job.Namespace), client.MatchingLabels{LabelJobName: job.Name, LabelRole: RolePartitioner}); err != nil {
				return "", err
			}
			why = partitionerMessage(fresh.Items)
		}
		if why != "" {
			msg += ": " + why
		}
		return msg, nil
	}
	return "", nil
}

// partitionerMessage is the last log line of the partition step's terminated
// container among pods, "" if none has one.
func partitionerMessage(pods []corev1.Pod) string {
	for i := range pods {
		if p := &pods[i]; p.Labels[LabelRole] == RolePartitioner {
			for _, cs := range p.Status.ContainerStatuses {
				if t := cs.State.Terminated; t != nil && t.Message != "" {
					return truncate(lastLine(t.Message), 256)
				}
			}
		}
	}
	return ""
}
