package controllers

import (
	"errors"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagedByLabel marks every object the operator creates, and selects what
// its cache holds of the kinds it owns.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// CacheOptions restricts the manager's cache of child kinds and pods to the
// objects this operator manages, so that memory does not grow with the rest
// of the cluster, and, when namespaces are given, every kind to those
// namespaces: the operator then sees and reconciles only their jobs. It keeps
// managed fields: the reconciler reads back from them what it last applied,
// to skip unchanged children (quiet.go).
func CacheOptions(namespaces ...string) cache.Options {
	sel := labels.SelectorFromSet(labels.Set{ManagedByLabel: "dorylus-operator"})
	by := cache.ByObject{Label: sel}
	var only map[string]cache.Config
	for _, ns := range namespaces {
		if only == nil {
			only = map[string]cache.Config{}
		}
		only[ns] = cache.Config{}
	}
	return cache.Options{DefaultNamespaces: only, ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}:           by,
		&corev1.Service{}:             by,
		&corev1.ServiceAccount{}:      by,
		&corev1.Pod{}:                 by,
		&rbacv1.Role{}:                by,
		&rbacv1.RoleBinding{}:         by,
		&networkingv1.NetworkPolicy{}: by,
		&appsv1.StatefulSet{}:         by,
		&appsv1.Deployment{}:          by,
	}}
}

// KnativeServed reports whether the API server serves Knative Services.
func KnativeServed(mapper meta.RESTMapper) (bool, error) { return served(mapper, KnativeServiceGVK) }

// served reports whether the API server serves gvk.
func served(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	default:
		var nm *meta.NoKindMatchError
		if errors.As(err, &nm) {
			return false, nil
		}
		return false, err
	}
}
