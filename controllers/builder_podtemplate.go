package controllers

import (
	"encoding/json"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Pod templates: what a user adds to a role's pods (spec.*.podTemplate).
// Admission refuses the keys and names the operator sets; here the
// operator's values win all the same.

// templateOf is a role's pod template; the empty one when unset.
func templateOf(t *dorylusv1alpha1.PodTemplate) *dorylusv1alpha1.PodTemplate {
	if t == nil {
		return &dorylusv1alpha1.PodTemplate{}
	}
	return t
}

// withOwn returns the user's entries with the operator's over them.
func withOwn[V ~string](user map[string]V, own map[string]string) map[string]string {
	out := make(map[string]string, len(user)+len(own))
	for k, v := range user {
		out[k] = string(v)
	}
	maps.Copy(out, own)
	return out
}

// pullSecrets are the template's image pull secrets as the pod spec names
// them.
func pullSecrets(s *dorylusv1alpha1.PodTemplateSpec) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, r := range s.ImagePullSecrets {
		out = append(out, corev1.LocalObjectReference{Name: r.Name})
	}
	return out
}

// serviceAccountName is the ServiceAccount of a role's pods: the template's,
// else the job's own.
func serviceAccountName(job *dorylusv1alpha1.GNNTrainingJob, t *dorylusv1alpha1.PodTemplate) string {
	if name := templateOf(t).Spec.ServiceAccountName; name != "" {
		return name
	}
	return runtimeName(job)
}

// withPodTemplate adds the template's pod settings, but the service account,
// to spec.
func withPodTemplate(spec *corev1ac.PodSpecApplyConfiguration, t *dorylusv1alpha1.PodTemplate) *corev1ac.PodSpecApplyConfiguration {
	s := &templateOf(t).Spec
	for _, r := range s.ImagePullSecrets {
		spec.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(r.Name))
	}
	if s.Affinity != nil {
		spec.WithAffinity(applyConfigOf[*corev1ac.AffinityApplyConfiguration](s.Affinity))
	}
	if s.PriorityClassName != "" {
		spec.WithPriorityClassName(s.PriorityClassName)
	}
	if len(s.TopologySpreadConstraints) > 0 {
		spec.WithTopologySpreadConstraints(applyConfigOf[[]*corev1ac.TopologySpreadConstraintApplyConfiguration](s.TopologySpreadConstraints)...)
	}
	return spec
}

// templateEnv is the template's environment, added after the operator's.
func templateEnv(t *dorylusv1alpha1.PodTemplate) []*corev1ac.EnvVarApplyConfiguration {
	return applyConfigOf[[]*corev1ac.EnvVarApplyConfiguration](envVars(&templateOf(t).Spec))
}

// envVars is the template's environment with the API version of field
// references set, as the API server would default it (see fieldEnv).
func envVars(s *dorylusv1alpha1.PodTemplateSpec) []corev1.EnvVar {
	out := make([]corev1.EnvVar, len(s.Env))
	for i, e := range s.Env {
		out[i] = *e.DeepCopy()
		if f := out[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
	return out
}

// applyConfigOf converts an API value into its apply configuration through
// JSON, which the two share field for field (so neither step fails).
func applyConfigOf[AC any](in any) AC {
	var out AC
	if data, err := json.Marshal(in); err == nil {
		_ = json.Unmarshal(data, &out)
	}
	return out
}

// unstructuredPodTemplate is the template's pod settings and environment in
// unstructured form, for the Knative Service's revision template.
func unstructuredPodTemplate(t *dorylusv1alpha1.PodTemplate) (spec map[string]any, env []any) {
	spec = map[string]any{}
	s := &templateOf(t).Spec
	pod, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodSpec{
		ServiceAccountName: s.ServiceAccountName, ImagePullSecrets: pullSecrets(s), Affinity: s.Affinity,
		PriorityClassName: s.PriorityClassName, TopologySpreadConstraints: s.TopologySpreadConstraints,
	})
	if err != nil {
		return spec, nil
	}
	for _, k := range []string{"serviceAccountName", "imagePullSecrets", "affinity", "priorityClassName", "topologySpreadConstraints"} {
		if v, ok := pod[k]; ok && v != nil {
			spec[k] = v
		}
	}
	container, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.Container{Env: envVars(s)})
	if err != nil {
		return spec, nil
	}
	env, _ = container["env"].([]any)
	return spec, env
}
