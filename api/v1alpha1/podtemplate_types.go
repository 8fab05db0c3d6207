package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// PodTemplate is what a user adds to the pods of one role: labels,
// annotations, identity, image pull secrets, scheduling and environment.
// The operator's own labels, annotations and environment variables are
// refused here, so that nothing a user sets can change how the operator
// selects, configures or scales the pods.
type PodTemplate struct {
	// Metadata is added to the pods' metadata.
	// +optional
	Metadata PodTemplateMetadata `json:"metadata,omitempty"`
	// Spec is added to the pods' spec.
	// +optional
	Spec PodTemplateSpec `json:"spec,omitempty"`
}

// PodTemplateMetadata is the labels and annotations added to a role's pods.
type PodTemplateMetadata struct {
	// Labels are added to the pods' labels. Keys under dorylus.dev/ and
	// app.kubernetes.io/name, instance, component and managed-by are the
	// operator's.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('dorylus.dev/') && !k.contains('.dorylus.dev/') && !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/component', 'app.kubernetes.io/managed-by']))",message="labels under dorylus.dev/ and app.kubernetes.io/name, instance, component and managed-by are set by the operator, which selects the job's pods by them",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="label keys must be an optional DNS-subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.'",reason=FieldValueInvalid
	Labels map[string]LabelValue `json:"labels,omitempty"`
	// Annotations are added to the pods' annotations. Keys under dorylus.dev/
	// and Knative's min-scale and max-scale (set from the function's minScale
	// and maxScale) are the operator's.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('dorylus.dev/') && !k.contains('.dorylus.dev/') && !(k in ['autoscaling.knative.dev/min-scale', 'autoscaling.knative.dev/max-scale', 'autoscaling.knative.dev/minScale', 'autoscaling.knative.dev/maxScale']))",message="annotations under dorylus.dev/ and autoscaling.knative.dev/min-scale and max-scale are set by the operator",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="annotation keys must be an optional DNS-subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.'",reason=FieldValueInvalid
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplateSpec is the pod settings a user adds to a role's pods. For the
// managed Knative function, affinity, priorityClassName and
// topologySpreadConstraints need Knative's kubernetes.podspec-affinity,
// -priorityclassname and -topologyspreadconstraints features enabled.
type PodTemplateSpec struct {
	// ServiceAccountName runs the pods as this ServiceAccount instead of the
	// one the operator makes for the job (<job>-runtime): an identity for
	// cloud access (IRSA, workload identity), say. For graph servers the
	// operator binds its progress-reporting Role to it, since graph server 0
	// writes the job's status.progress.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// ImagePullSecrets name Secrets in the job's namespace that hold
	// credentials for pulling the image.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	ImagePullSecrets []ImagePullSecret `json:"imagePullSecrets,omitempty"`
	// Affinity is the pods' node, pod and anti-pod affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// PriorityClassName is the pods' PriorityClass.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Env is added to the environment of the role's container, after the
	// operator's DORYLUS_ variables (so it may refer to them as $(NAME)).
	// Names are unique, non-empty, and must not start with DORYLUS_. A variable has a value or one valueFrom source (fieldRef,
	// resourceFieldRef, configMapKeyRef or secretKeyRef), which names its
	// ConfigMap or Secret and a field or resource a container can read.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('DORYLUS_'))",message="environment variables starting with DORYLUS_ are set by the operator",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.name != '')",message="environment variable names must not be empty",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.value) || e.value == '')",message="an environment variable sets value or valueFrom, not both",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || [has(e.valueFrom.fieldRef), has(e.valueFrom.resourceFieldRef), has(e.valueFrom.configMapKeyRef), has(e.valueFrom.secretKeyRef)].filter(x, x).size() == 1)",message="valueFrom must set exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || (!has(e.valueFrom.secretKeyRef) || e.valueFrom.secretKeyRef.name != '') && (!has(e.valueFrom.configMapKeyRef) || e.valueFrom.configMapKeyRef.name != ''))",message="valueFrom.secretKeyRef.name and valueFrom.configMapKeyRef.name must name a Secret and a ConfigMap",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.fieldRef) || e.valueFrom.fieldRef.fieldPath in ['metadata.name', 'metadata.namespace', 'metadata.uid', 'spec.nodeName', 'spec.serviceAccountName', 'status.hostIP', 'status.hostIPs', 'status.podIP', 'status.podIPs'] || (e.valueFrom.fieldRef.fieldPath.startsWith(\"metadata.labels['\") || e.valueFrom.fieldRef.fieldPath.startsWith(\"metadata.annotations['\")) && e.valueFrom.fieldRef.fieldPath.endsWith(\"']\"))",message="valueFrom.fieldRef.fieldPath must be metadata.name, .namespace, .uid, .labels['KEY'], .annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.hostIP(s) or status.podIP(s)",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.resourceFieldRef) || e.valueFrom.resourceFieldRef.resource in ['limits.cpu', 'limits.memory', 'limits.ephemeral-storage', 'requests.cpu', 'requests.memory', 'requests.ephemeral-storage'] || e.valueFrom.resourceFieldRef.resource.startsWith('limits.hugepages-') || e.valueFrom.resourceFieldRef.resource.startsWith('requests.hugepages-'))",message="valueFrom.resourceFieldRef.resource must be limits or requests of cpu, memory, ephemeral-storage or hugepages-<size>",reason=FieldValueInvalid
	Env []corev1.EnvVar `json:"env,omitempty"`
	// TopologySpreadConstraints spread the pods across topology domains.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=topologyKey
	// +listMapKey=whenUnsatisfiable
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.maxSkew >= 1 && size(c.topologyKey) > 0 && c.whenUnsatisfiable in ['DoNotSchedule', 'ScheduleAnyway'])",message="each topology spread constraint needs maxSkew of at least 1, a topologyKey, and whenUnsatisfiable DoNotSchedule or ScheduleAnyway",reason=FieldValueInvalid
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// LabelValue is a label value: at most 63 letters, digits, '-', '_' or '.',
// beginning and ending with a letter or digit.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`
type LabelValue string

// ImagePullSecret names a Secret in the job's namespace holding registry
// credentials.
type ImagePullSecret struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}
