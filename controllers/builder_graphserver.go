package controllers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// buildGraphService is the headless Service giving each graph server the
// stable name <job>-gs-<p>.<job>-gs.<ns>.svc. It publishes not-ready
// addresses, since peers must find each other before they are ready.
func buildGraphService(job *dorylusv1alpha1.GNNTrainingJob) *corev1ac.ServiceApplyConfiguration {
	return buildHeadlessService(job, graphServerName(job), RoleGraphServer, jobconfig.GraphServerPort)
}

// buildHeadlessService is the headless Service name over the pods of role, serving gRPC on
// port. It publishes not-ready addresses, since servers must find each other before they are
// ready.
func buildHeadlessService(job *dorylusv1alpha1.GNNTrainingJob, name, role string, port int32) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(name, job.Namespace).
		WithLabels(childLabels(job, role)).
		WithOwnerReferences(ownerReference(job)).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithPublishNotReadyAddresses(true).
			WithSelector(selectorLabels(job, role)).
			WithPorts(corev1ac.ServicePort().WithName("grpc").WithProtocol(corev1.ProtocolTCP).
				WithPort(port).WithTargetPort(intstr.FromString("grpc"))))
}

// buildGraphStatefulSet is the StatefulSet of graph servers: ordinal p serves
// partition p. replicas is the number wanted now (0 while suspended or
// finished).
func buildGraphStatefulSet(job *dorylusv1alpha1.GNNTrainingJob, image, cfgHash, period string, replicas int32) *appsv1ac.StatefulSetApplyConfiguration {
	name := graphServerName(job)
	tmpl := templateOf(job.Spec.GraphServers.PodTemplate)
	volumes := podVolumes(job)
	mounts := podMounts()
	keys := tlsKeys
	if managedKnative(job) {
		keys = append(keys[:len(keys):len(keys)], pki.TokenFile)
	}
	if lambdaPull(job) {
		// the function issuer, which certifies the keys of the functions its descriptors reach
		keys = append(keys[:len(keys):len(keys)], pki.FunctionCAFile, pki.FunctionCAKeyFile)
	}
	cv, cm := credentialsVolume(job, period, keys...)
	volumes, mounts = append(volumes, cv), append(mounts, cm)
	if k := job.Spec.Backend().Knative; k != nil && k.TokenSecretRef != nil {
		v, m := secretVolume(secretFunctionToken, k.TokenSecretRef.Name)
		volumes, mounts = append(volumes, v), append(mounts, m)
	}
	vs, ms := datasetVolumes(job)
	volumes, mounts = append(volumes, vs...), append(mounts, ms...)
	vs, ms = partitionVolumes(job, true)
	volumes, mounts = append(volumes, vs...), append(mounts, ms...)
	if l := job.Spec.Backend().Lambda; l != nil && l.Credentials.SecretRef != nil {
		v, m := secretVolume(secretLambda, l.Credentials.SecretRef.Name)
		volumes, mounts = append(volumes, v), append(mounts, m)
	}
	vs, ms = outputVolumes(job)
	volumes, mounts = append(volumes, vs...), append(mounts, ms...)
	env := append(commonEnv(job), fieldEnv(jobconfig.EnvPartition, fmt.Sprintf("metadata.labels['%s']", LabelPodIndex)),
		fieldEnv(jobconfig.EnvAttempt, fmt.Sprintf("metadata.labels['%s']", LabelRun)))

	container := corev1ac.Container().
		WithName(RoleGraphServer).
		WithImage(image).
		WithCommand(jobconfig.Command).
		WithArgs("graph-server", "--config", jobconfig.DefaultPath, "--partition", "$("+jobconfig.EnvPartition+")").
		// Peers may wait for a node or a Secret: the operator says why in the
		// Ready condition, and runPolicy.activeDeadlineSeconds bounds the job.
		WithArgs("--startup-timeout", "0").
		WithArgs(serverArgs...).
		WithPorts(serverPorts(jobconfig.GraphServerPort)...).
		WithEnv(env...).
		WithEnv(templateEnv(job.Spec.GraphServers.PodTemplate)...).
		WithResources(resources(job.Spec.GraphServers.Resources)).
		WithReadinessProbe(grpcReadiness()).
		WithSecurityContext(containerSecurityContext()).
		// A failed server's last log lines say why: the Failed condition and the
		// Restarting event quote them (restarts.go).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithVolumeMounts(mounts...)

	podSpec := serverPodSpec(job, &job.Spec.GraphServers.ServerPodSpec, true)
	withGrace(job, podSpec, container)
	podSpec.WithContainers(container).WithVolumes(volumes...)

	return appsv1ac.StatefulSet(name, job.Namespace).
		WithLabels(childLabels(job, RoleGraphServer)).
		WithOwnerReferences(ownerReference(job)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(replicas).
			WithServiceName(name).
			WithPodManagementPolicy(appsv1.ParallelPodManagement).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(job, RoleGraphServer))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(withOwn(tmpl.Metadata.Labels, serverPodLabels(job, RoleGraphServer))).
				WithAnnotations(withOwn(tmpl.Metadata.Annotations, map[string]string{AnnotationConfigHash: cfgHash, AnnotationCredentialsPeriod: period})).
				WithSpec(podSpec)))
}
