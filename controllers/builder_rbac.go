package controllers

import (
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// buildServiceAccount is the identity of the job's pods. For a Lambda backend
// authenticated by role, it carries the IRSA role annotation.
func buildServiceAccount(job *dorylusv1alpha1.GNNTrainingJob) *corev1ac.ServiceAccountApplyConfiguration {
	sa := corev1ac.ServiceAccount(runtimeName(job), job.Namespace).
		WithLabels(childLabels(job, RoleRuntime)).
		WithOwnerReferences(ownerReference(job))
	if l := job.Spec.Backend().Lambda; l != nil && l.Credentials.RoleARN != "" {
		sa.WithAnnotations(map[string]string{AnnotationIRSARole: l.Credentials.RoleARN})
	}
	return sa
}

// buildRole grants the job's pods the one thing they need from the API: to
// read and patch the status of their own job (graph server 0 reports
// progress there). Only the graph servers mount a token, and they share one
// pod template; the ValidatingAdmissionPolicy of config/admission refuses
// the write unless the token is bound to graph server 0's pod.
func buildRole(job *dorylusv1alpha1.GNNTrainingJob) *rbacv1ac.RoleApplyConfiguration {
	return rbacv1ac.Role(runtimeName(job), job.Namespace).
		WithLabels(childLabels(job, RoleRuntime)).
		WithOwnerReferences(ownerReference(job)).
		WithRules(rbacv1ac.PolicyRule().
			WithAPIGroups(dorylusv1alpha1.GroupVersion.Group).
			WithResources(dorylusv1alpha1.Resource+"/status").
			WithResourceNames(job.Name).
			WithVerbs("get", "patch"))
}

// buildRoleBinding binds the Role to the job's ServiceAccount and, when the
// graph servers run as another one, to that one too: graph server 0 reports
// progress.
func buildRoleBinding(job *dorylusv1alpha1.GNNTrainingJob) *rbacv1ac.RoleBindingApplyConfiguration {
	b := rbacv1ac.RoleBinding(runtimeName(job), job.Namespace).
		WithLabels(childLabels(job, RoleRuntime)).
		WithOwnerReferences(ownerReference(job)).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(runtimeName(job))).
		WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithName(runtimeName(job)).WithNamespace(job.Namespace))
	if sa := serviceAccountName(job, job.Spec.GraphServers.PodTemplate); sa != runtimeName(job) {
		b.WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithName(sa).WithNamespace(job.Namespace))
	}
	return b
}
