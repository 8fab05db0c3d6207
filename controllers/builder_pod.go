package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Volume names in server pods.
const (
	volumeConfig      = "config"
	volumeTmp         = "tmp"
	volumeDataset     = "dataset"
	volumeCheckpoint  = "checkpoint"
	volumeCredentials = "credentials"
)

// ownerReference makes the job the controlling owner of a child, so that the
// garbage collector deletes children with the job and Owns() watches map
// child events back to it.
func ownerReference(job *dorylusv1alpha1.GNNTrainingJob) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(dorylusv1alpha1.GroupVersion.String()).
		WithKind("GNNTrainingJob").
		WithName(job.Name).
		WithUID(job.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// runtimeImage is the image of the job's pods.
func runtimeImage(job *dorylusv1alpha1.GNNTrainingJob, defaultImage string) string {
	if job.Spec.Image != "" {
		return job.Spec.Image
	}
	return defaultImage
}

// podSecurityContext runs every pod as non-root with the runtime's default
// seccomp profile.
func podSecurityContext() *corev1ac.PodSecurityContextApplyConfiguration {
	return corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

// containerSecurityContext drops every capability and makes the root file
// system read-only.
func containerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop(corev1.Capability("ALL")))
}

// serverArgs and serverPorts are a server container's Prometheus endpoint and
// plaintext health endpoint (its data-plane port speaks mutual TLS, which the
// kubelet's gRPC probe cannot).
var serverArgs = []string{"--metrics-address", fmt.Sprintf(":%d", jobconfig.MetricsPort), "--health-address", fmt.Sprintf(":%d", jobconfig.HealthPort)}

func serverPorts(grpcPort int32) []*corev1ac.ContainerPortApplyConfiguration {
	return []*corev1ac.ContainerPortApplyConfiguration{
		corev1ac.ContainerPort().WithName("grpc").WithContainerPort(grpcPort).WithProtocol(corev1.ProtocolTCP),
		corev1ac.ContainerPort().WithName("metrics").WithContainerPort(jobconfig.MetricsPort).WithProtocol(corev1.ProtocolTCP),
		corev1ac.ContainerPort().WithName("health").WithContainerPort(jobconfig.HealthPort).WithProtocol(corev1.ProtocolTCP),
	}
}

// commonEnv is the downward-API environment of every server container.
func commonEnv(job *dorylusv1alpha1.GNNTrainingJob) []*corev1ac.EnvVarApplyConfiguration {
	return []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName(jobconfig.EnvJobName).WithValue(job.Name),
		fieldEnv(jobconfig.EnvNamespace, "metadata.namespace"),
		fieldEnv(jobconfig.EnvPodName, "metadata.name"),
		// the address a server advertises to functions on the pull data path
		fieldEnv(jobconfig.EnvPodIP, "status.podIP"),
	}
}

// fieldEnv is a downward-API variable. The API version, which the API server
// would default, is set so that the applied selector (an atomic struct)
// reads back unchanged.
func fieldEnv(name, fieldPath string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(name).
		WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath(fieldPath)))
}

// podVolumes are the config and scratch volumes of every server pod.
func podVolumes(job *dorylusv1alpha1.GNNTrainingJob) []*corev1ac.VolumeApplyConfiguration {
	return []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName(volumeConfig).WithConfigMap(
			corev1ac.ConfigMapVolumeSource().WithName(configMapName(job)).
				WithItems(corev1ac.KeyToPath().WithKey(jobconfig.ConfigMapKey).WithPath(jobconfig.ConfigMapKey))),
		corev1ac.Volume().WithName(volumeTmp).WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	}
}

func podMounts() []*corev1ac.VolumeMountApplyConfiguration {
	return []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(volumeConfig).WithMountPath(jobconfig.MountDir).WithReadOnly(true),
		corev1ac.VolumeMount().WithName(volumeTmp).WithMountPath("/tmp"),
	}
}

// secretVolume mounts a credentials Secret read-only under
// jobconfig.SecretsDir/<purpose>.
func secretVolume(purpose, secret string) (*corev1ac.VolumeApplyConfiguration, *corev1ac.VolumeMountApplyConfiguration) {
	name := "secret-" + purpose
	return corev1ac.Volume().WithName(name).WithSecret(corev1ac.SecretVolumeSource().WithSecretName(secret)),
		corev1ac.VolumeMount().WithName(name).WithMountPath(secretDir(purpose)).WithReadOnly(true)
}

// pvcVolume mounts a PersistentVolumeClaim at mountPath.
func pvcVolume(name, claim, mountPath string, readOnly bool) (*corev1ac.VolumeApplyConfiguration, *corev1ac.VolumeMountApplyConfiguration) {
	return corev1ac.Volume().WithName(name).WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(claim).WithReadOnly(readOnly)),
		corev1ac.VolumeMount().WithName(name).WithMountPath(mountPath).WithReadOnly(readOnly)
}

// grpcReadiness probes the standard gRPC health service on the plaintext
// health port, with time to answer on a busy node (the default 1 s timed out
// with four jobs on two cores).
func grpcReadiness() *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithGRPC(corev1ac.GRPCAction().WithPort(jobconfig.HealthPort)).
		WithPeriodSeconds(5).
		WithTimeoutSeconds(5).
		WithFailureThreshold(3)
}

// resources converts typed requirements into their apply configuration.
func resources(r corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
	out := corev1ac.ResourceRequirements()
	if len(r.Requests) > 0 {
		out.WithRequests(r.Requests)
	}
	if len(r.Limits) > 0 {
		out.WithLimits(r.Limits)
	}
	return out
}

// tolerations converts typed tolerations into their apply configuration.
func tolerations(ts []corev1.Toleration) []*corev1ac.TolerationApplyConfiguration {
	out := make([]*corev1ac.TolerationApplyConfiguration, 0, len(ts))
	for _, t := range ts {
		a := corev1ac.Toleration()
		if t.Key != "" {
			a.WithKey(t.Key)
		}
		if t.Operator != "" {
			a.WithOperator(t.Operator)
		}
		if t.Value != "" {
			a.WithValue(t.Value)
		}
		if t.Effect != "" {
			a.WithEffect(t.Effect)
		}
		if t.TolerationSeconds != nil {
			a.WithTolerationSeconds(*t.TolerationSeconds)
		}
		out = append(out, a)
	}
	return out
}

// serverPodSpec is the identity, scheduling and security part of a server
// pod.
func serverPodSpec(job *dorylusv1alpha1.GNNTrainingJob, p *dorylusv1alpha1.ServerPodSpec, automountToken bool) *corev1ac.PodSpecApplyConfiguration {
	spec := corev1ac.PodSpec().
		WithServiceAccountName(serviceAccountName(job, p.PodTemplate)).
		WithAutomountServiceAccountToken(automountToken).
		WithEnableServiceLinks(false).
		WithSecurityContext(podSecurityContext())
	if len(p.NodeSelector) > 0 {
		spec.WithNodeSelector(p.NodeSelector)
	}
	if len(p.Tolerations) > 0 {
		spec.WithTolerations(tolerations(p.Tolerations)...)
	}
	return withPodTemplate(spec, p.PodTemplate)
}
