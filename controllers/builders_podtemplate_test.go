package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// fullPodTemplate sets every field of a pod template.
func fullPodTemplate() *dorylusv1alpha1.PodTemplate {
	return &dorylusv1alpha1.PodTemplate{
		Metadata: dorylusv1alpha1.PodTemplateMetadata{
			Labels:      map[string]dorylusv1alpha1.LabelValue{"team": "graphs", "example.org/cost-center": "42"},
			Annotations: map[string]string{"example.org/owner": "ml@example.org"},
		},
		Spec: dorylusv1alpha1.PodTemplateSpec{
			ServiceAccountName: "ml-identity",
			ImagePullSecrets:   []dorylusv1alpha1.ImagePullSecret{{Name: "registry"}, {Name: "mirror"}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}},
				}}},
			}},
			PriorityClassName: "training",
			Env: []corev1.EnvVar{
				{Name: "GOGC", Value: "200"},
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "tokens"}, Key: "t"}}},
			},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
			}},
		},
	}
}

// TestPodTemplates builds each role's pods with and without a full pod
// template and checks that the template adds exactly its fields, with the
// operator's labels, annotations and environment kept.
func TestPodTemplates(t *testing.T) {
	knative := func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			Service: &dorylusv1alpha1.KnativeServiceTemplate{MaxScale: 10}}}
	}
	tests := []struct {
		role string
		set  func(*dorylusv1alpha1.GNNTrainingJob, *dorylusv1alpha1.PodTemplate)
		pod  func(*testing.T, *dorylusv1alpha1.GNNTrainingJob) corev1.PodTemplateSpec
	}{
		{"graph servers", func(j *dorylusv1alpha1.GNNTrainingJob, p *dorylusv1alpha1.PodTemplate) {
			j.Spec.GraphServers.PodTemplate = p
		},
			func(t *testing.T, j *dorylusv1alpha1.GNNTrainingJob) corev1.PodTemplateSpec {
				return toTyped[appsv1.StatefulSet](t, buildGraphStatefulSet(j, "img:1", "h", "p", 1)).Spec.Template
			}},
		{"parameter servers", func(j *dorylusv1alpha1.GNNTrainingJob, p *dorylusv1alpha1.PodTemplate) {
			j.Spec.ParameterServers.PodTemplate = p
		},
			func(t *testing.T, j *dorylusv1alpha1.GNNTrainingJob) corev1.PodTemplateSpec {
				return toTyped[appsv1.Deployment](t, buildParamDeployment(j, "img:1", "h", "p", 0, 1)).Spec.Template
			}},
		{"knative function", func(j *dorylusv1alpha1.GNNTrainingJob, p *dorylusv1alpha1.PodTemplate) {
			knative(j)
			j.Spec.TensorBackend.Knative.Service.PodTemplate = p
		}, func(t *testing.T, j *dorylusv1alpha1.GNNTrainingJob) corev1.PodTemplateSpec {
			return *toTyped[corev1.PodTemplateSpec](t, buildKnativeService(j, "img:1", "p", true).Object["spec"].(map[string]any)["template"])
		}},
	}
	for _, tc := range tests {
		t.Run(tc.role, func(t *testing.T) {
			base := tc.pod(t, testJob(func(j *dorylusv1alpha1.GNNTrainingJob) { tc.set(j, nil) }))
			tmpl := fullPodTemplate()
			got := tc.pod(t, testJob(func(j *dorylusv1alpha1.GNNTrainingJob) { tc.set(j, tmpl) }))

			want := base.DeepCopy()
			for k, v := range tmpl.Metadata.Labels {
				want.Labels[k] = string(v)
			}
			for k, v := range tmpl.Metadata.Annotations {
				want.Annotations[k] = v
			}
			s := &want.Spec
			s.ServiceAccountName = "ml-identity"
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}, {Name: "mirror"}}
			s.Affinity = tmpl.Spec.Affinity
			s.PriorityClassName = "training"
			s.TopologySpreadConstraints = tmpl.Spec.TopologySpreadConstraints
			s.Containers[0].Env = append(s.Containers[0].Env, fullPodTemplate().Spec.Env...)
			s.Containers[0].Env[len(base.Spec.Containers[0].Env)+1].ValueFrom.FieldRef.APIVersion = "v1" // as the API server defaults it
			if diff := cmp.Diff(*want, got); diff != "" {
				t.Errorf("pod template (-want +got):\n%s", diff)
			}

			// Were admission bypassed, the operator's keys would still win.
			clash := fullPodTemplate()
			clash.Metadata.Labels, clash.Metadata.Annotations = map[string]dorylusv1alpha1.LabelValue{}, map[string]string{}
			for k := range base.Labels {
				clash.Metadata.Labels[k] = "other"
			}
			for k := range base.Annotations {
				clash.Metadata.Annotations[k] = "other"
			}
			got = tc.pod(t, testJob(func(j *dorylusv1alpha1.GNNTrainingJob) { tc.set(j, clash) }))
			if diff := cmp.Diff(base.Labels, got.Labels); diff != "" {
				t.Errorf("labels with clashing keys (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(base.Annotations, got.Annotations); diff != "" {
				t.Errorf("annotations with clashing keys (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRoleBindingFollowsGraphServerServiceAccount checks that the reporter
// Role is bound to the graph servers' own ServiceAccount, and only to the
// ServiceAccounts graph servers run as.
func TestRoleBindingFollowsGraphServerServiceAccount(t *testing.T) {
	own := rbacv1.Subject{Kind: "ServiceAccount", Name: "cora-runtime", Namespace: "ml"}
	tests := []struct {
		name string
		job  func(*dorylusv1alpha1.GNNTrainingJob)
		want []rbacv1.Subject
	}{
		{"graph servers as their own", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.GraphServers.PodTemplate = fullPodTemplate()
		}, []rbacv1.Subject{own, {Kind: "ServiceAccount", Name: "ml-identity", Namespace: "ml"}}},
		{"graph servers as the job's, named explicitly", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.GraphServers.PodTemplate = &dorylusv1alpha1.PodTemplate{Spec: dorylusv1alpha1.PodTemplateSpec{ServiceAccountName: "cora-runtime"}}
		}, []rbacv1.Subject{own}},
		{"only parameter servers as their own", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.ParameterServers.PodTemplate = fullPodTemplate()
		}, []rbacv1.Subject{own}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := toTyped[rbacv1.RoleBinding](t, buildRoleBinding(testJob(tc.job)))
			if diff := cmp.Diff(tc.want, got.Subjects); diff != "" {
				t.Errorf("RoleBinding subjects (-want +got):\n%s", diff)
			}
		})
	}
}
