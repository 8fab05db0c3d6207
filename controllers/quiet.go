package controllers

import (
	"context"
	"encoding/json"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Quiet policy: at scale, the operator sends requests only for changes. Graph
// server 0 writes status.progress about once a second; such a write wakes no
// reconcile unless the progress ends the job. A reconcile applies only the
// children whose desired state differs from what the operator last applied.

// conflictRecheck is how soon a reconcile whose status write met a newer
// version of the job runs again: that version's event may have been dropped
// as a progress report.
const conflictRecheck = 200 * time.Millisecond

// jobUpdateMatters passes job updates except those that change only
// status.progress without ending the job.
func jobUpdateMatters() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldJob, ok1 := e.ObjectOld.(*dorylusv1alpha1.GNNTrainingJob)
		newJob, ok2 := e.ObjectNew.(*dorylusv1alpha1.GNNTrainingJob)
		return !ok1 || !ok2 || !progressOnly(oldJob, newJob) || progressEndsJob(newJob)
	}}
}

// progressOnly reports whether two versions of a job differ at most in
// status.progress (and the resourceVersion and managed fields that come with
// any write).
func progressOnly(oldJob, newJob *dorylusv1alpha1.GNNTrainingJob) bool {
	a, b := *oldJob, *newJob
	for _, j := range []*dorylusv1alpha1.GNNTrainingJob{&a, &b} {
		j.Status.Progress = nil
		j.ResourceVersion = ""
		j.ManagedFields = nil
	}
	return equality.Semantic.DeepEqual(a, b)
}

// progressEndsJob reports whether the progress of an unfinished job ends it:
// decide without a start time judges the progress alone (training error,
// last epoch, target accuracy, budget).
func progressEndsJob(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return !isFinished(job) && decide(job, nil, time.Time{}) != nil
}

// unchanged reports whether applying desired would change nothing: the
// fields FieldOwner owns on the cached child, read back from its managed
// fields, equal desired. Any doubt (not cached, not extractable) answers
// false, so the child is applied.
func (r *GNNTrainingJobReconciler) unchanged(ctx context.Context, namespace string, desired runtime.ApplyConfiguration) bool {
	var applied any
	var err error
	switch d := desired.(type) {
	case *corev1ac.ServiceAccountApplyConfiguration:
		applied, err = extract(ctx, r, key(namespace, d.GetName()), &corev1.ServiceAccount{}, corev1ac.ExtractServiceAccount)
	case *corev1ac.ConfigMapApplyConfiguration:
		applied, err = extract(ctx, r, key(namespace, d.GetName()), &corev1.ConfigMap{}, corev1ac.ExtractConfigMap)
	case *corev1ac.ServiceApplyConfiguration:
		applied, err = extract(ctx, r, key(namespace, d.GetName()), &corev1.Service{}, corev1ac.ExtractService)
	case *rbacv1ac.RoleApplyConfiguration:
		applied, err = extract(ctx, r, key(namespace, d.GetName()), &rbacv1.Role{}, rbacv1ac.ExtractRole)
	case *rbacv1ac.RoleBindingApplyConfiguration:
		applied, err = extract(ctx, r, key(namespace, d.GetName()), &rbacv1.RoleBinding{}, rbacv1ac.ExtractRoleBinding)
	case *networkingv1ac.NetworkPolicyApplyConfiguration:
		applied, err = extract(ctx, r, key(namespace, d.GetName()), &networkingv1.NetworkPolicy{}, networkingv1ac.ExtractNetworkPolicy)
	case *appsv1ac.StatefulSetApplyConfiguration:
		applied, err = extract(ctx, r, key(namespace, d.GetName()), &appsv1.StatefulSet{}, appsv1ac.ExtractStatefulSet)
	case *appsv1ac.DeploymentApplyConfiguration:
		applied, err = extract(ctx, r, key(namespace, d.GetName()), &appsv1.Deployment{}, appsv1ac.ExtractDeployment)
	case runtime.Unstructured:
		applied, err = extractUnstructured(ctx, r, d)
	default:
		return false
	}
	return err == nil && sameJSON(applied, desired)
}

func key(namespace string, name *string) client.ObjectKey {
	if name == nil {
		return client.ObjectKey{Namespace: namespace}
	}
	return client.ObjectKey{Namespace: namespace, Name: *name}
}

// extract reads a typed child from c and returns the apply configuration
// FieldOwner owns on it.
func extract[T client.Object, AC any](ctx context.Context, c client.Reader, key client.ObjectKey, obj T, fn func(T, string) (AC, error)) (any, error) {
	if err := c.Get(ctx, key, obj); err != nil {
		return nil, err
	}
	return fn(obj, FieldOwner)
}

// extractUnstructured is extract for a child without a Go type (the Knative
// Service), whose schema leaves the fields untyped.
func extractUnstructured(ctx context.Context, c client.Reader, desired runtime.Unstructured) (any, error) {
	d := &unstructured.Unstructured{Object: desired.UnstructuredContent()}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(d.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := managedfields.ExtractInto(live, typed.DeducedParseableType, FieldOwner, &out, ""); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: out}
	u.SetName(live.GetName())
	u.SetNamespace(live.GetNamespace())
	return u.Object, nil
}

// sameJSON compares two values by their JSON forms, in which an apply
// configuration and the same object read back agree.
func sameJSON(a, b any) bool {
	var ja, jb any
	for _, p := range []struct {
		in  any
		out *any
	}{{a, &ja}, {b, &jb}} {
		data, err := json.Marshal(p.in)
		if err != nil {
			return false
		}
		if err := json.Unmarshal(data, p.out); err != nil {
			return false
		}
	}
	return reflect.DeepEqual(ja, jb)
}
