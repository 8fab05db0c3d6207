package controllers

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// buildParamService is the headless Service over every parameter-server
// shard; it also gives shard n the name <job>-ps-<n>.<job>-ps.<ns>.svc
// through the pods' hostname and subdomain.
func buildParamService(job *dorylusv1alpha1.GNNTrainingJob) *corev1ac.ServiceApplyConfiguration {
	return buildHeadlessService(job, paramServiceName(job), RoleParamServer, jobconfig.ParamServerPort)
}

// paramShardLabels select the pod of one shard.
func paramShardLabels(job *dorylusv1alpha1.GNNTrainingJob, shard int32) map[string]string {
	l := selectorLabels(job, RoleParamServer)
	l[LabelShard] = strconv.Itoa(int(shard))
	return l
}

// buildParamDeployment is the Deployment of parameter-server shard n: one
// pod (replicas 0 while suspended or finished), recreated rather than rolled
// so that two pods never hold the shard's hostname at once.
func buildParamDeployment(job *dorylusv1alpha1.GNNTrainingJob, image, cfgHash, period string, shard, replicas int32) *appsv1ac.DeploymentApplyConfiguration {
	name := paramShardName(job, shard)
	tmpl := templateOf(job.Spec.ParameterServers.PodTemplate)
	volumes := podVolumes(job)
	mounts := podMounts()
	cv, cm := credentialsVolume(job, period, tlsKeys...)
	volumes, mounts = append(volumes, cv), append(mounts, cm)
	if c := job.Spec.Checkpoint; c != nil && c.PVC != nil {
		v, m := pvcVolume(volumeCheckpoint, c.PVC.ClaimName, jobconfig.CheckpointMountPath, false)
		volumes, mounts = append(volumes, v), append(mounts, m)
	}
	if c := job.Spec.Checkpoint; c != nil && c.S3 != nil && c.S3.SecretRef != nil {
		v, m := secretVolume(secretCheckpoint, c.S3.SecretRef.Name)
		volumes, mounts = append(volumes, v), append(mounts, m)
	}
	podLabels := serverPodLabels(job, RoleParamServer)
	podLabels[LabelShard] = strconv.Itoa(int(shard))

	container := corev1ac.Container().
		WithName(RoleParamServer).
		WithImage(image).
		WithCommand(jobconfig.Command).
		WithArgs("param-server", "--config", jobconfig.DefaultPath, "--shard", strconv.Itoa(int(shard))).
		WithArgs(serverArgs...).
		WithPorts(serverPorts(jobconfig.ParamServerPort)...).
		WithEnv(commonEnv(job)...).
		WithEnv(templateEnv(job.Spec.ParameterServers.PodTemplate)...).
		WithResources(resources(job.Spec.ParameterServers.Resources)).
		WithReadinessProbe(grpcReadiness()).
		WithSecurityContext(containerSecurityContext()).
		// A failed server's last log lines say why: the Failed condition and the
		// Restarting event quote them (restarts.go).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithVolumeMounts(mounts...)

	podSpec := serverPodSpec(job, &job.Spec.ParameterServers.ServerPodSpec, false)
	withGrace(job, podSpec, container)
	podSpec.WithHostname(name).
		WithSubdomain(paramServiceName(job)).
		WithContainers(container).
		WithVolumes(volumes...)

	labels := childLabels(job, RoleParamServer)
	labels[LabelShard] = podLabels[LabelShard]
	return appsv1ac.Deployment(name, job.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(job)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(paramShardLabels(job, shard))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(withOwn(tmpl.Metadata.Labels, podLabels)).
				WithAnnotations(withOwn(tmpl.Metadata.Annotations, map[string]string{AnnotationConfigHash: cfgHash, AnnotationCredentialsPeriod: period})).
				WithSpec(podSpec)))
}
