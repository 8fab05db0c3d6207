package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Children policy: every child is written with server-side apply under
// FieldOwner, forcing ownership, so fields set by others (defaults, HPA-like
// actors) are left alone; a child whose owned fields already hold the
// desired values is not sent at all (quiet.go). Children that the spec no longer asks for (parameter shards above
// the replica count, a Knative Service after switching backends before the
// start) are deleted.

// managedKnative reports whether the job asks for an operator-managed
// Knative Service.
func managedKnative(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return job.Spec.Backend().Knative != nil && job.Spec.Backend().Knative.Service != nil
}

// lambdaPull reports whether the job's Lambda functions pull their tensors
// from the servers (dataPath Pull).
func lambdaPull(job *dorylusv1alpha1.GNNTrainingJob) bool {
	l := job.Spec.Backend().Lambda
	return l != nil && l.DataPath == dorylusv1alpha1.DataPathPull
}

// desiredChildren builds every child of the job but its credentials Secret
// (credentials.go). running selects the replica counts: the spec's, or zero
// while suspended or finished; period names the credentials the pods mount.
func (r *GNNTrainingJobReconciler) desiredChildren(job *dorylusv1alpha1.GNNTrainingJob, running bool, period string) ([]runtime.ApplyConfiguration, error) {
	cfg, err := resolveRunConfig(job, &r.Pricing)
	if err != nil {
		return nil, fmt.Errorf("resolve run config: %w", err)
	}
	runJSON, err := jobconfig.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode run config: %w", err)
	}
	hash, err := configDigest(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode run config: %w", err)
	}
	image := runtimeImage(job, r.RuntimeImage)
	// The servers wait at zero for the partition step.
	serve := running && !partitioning(job)
	gsReplicas, psReplicas := int32(0), int32(0)
	if serve {
		gsReplicas, psReplicas = job.Spec.GraphServers.Replicas, 1
	}
	out := []runtime.ApplyConfiguration{
		buildServiceAccount(job),
		buildRole(job),
		buildRoleBinding(job),
		buildConfigMap(job, runJSON),
		buildGraphService(job),
		buildGraphStatefulSet(job, image, hash, period, gsReplicas),
		buildParamService(job),
		buildNetworkPolicy(job, r.MetricsScrapers),
		buildFunctionNetworkPolicy(job),
	}
	for n := int32(0); n < paramShards(job); n++ {
		out = append(out, buildParamDeployment(job, image, hash, period, n, psReplicas))
	}
	if managedKnative(job) && r.KnativeAvailable {
		out = append(out, client.ApplyConfigurationFromUnstructured(buildKnativeService(job, image, period, serve)))
	}
	if running && partitioning(job) {
		out = append(out, buildPartitionJob(job, image))
	}
	return out, nil
}

// applyChildren applies every child and prunes the ones no longer wanted;
// while running, the credentials of period first. It applies all it can and
// returns the errors joined.
func (r *GNNTrainingJobReconciler) applyChildren(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, running bool, period string) error {
	children, err := r.desiredChildren(job, running, period)
	if err != nil {
		return err
	}
	if running {
		if err := r.ensureCredentials(ctx, job, period); err != nil {
			return err // no server may start without them
		}
	}
	var errs []error
	for _, c := range children {
		if r.unchanged(ctx, job.Namespace, c) {
			continue
		}
		if err := r.Apply(ctx, c, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.pruneChildren(ctx, job))
	return errors.Join(errs...)
}

// pruneChildren deletes parameter-shard Deployments beyond the replica count,
// a managed Knative Service the spec no longer asks for, the Workload of a
// job no longer queued in Kueue, and the partition step's Job once it has
// reported.
func (r *GNNTrainingJobReconciler) pruneChildren(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob) error {
	var deps appsv1.DeploymentList
	if err := r.List(ctx, &deps, client.InNamespace(job.Namespace), client.MatchingLabels(selectorLabels(job, RoleParamServer))); err != nil {
		return fmt.Errorf("list parameter servers: %w", err)
	}
	var errs []error
	for i := range deps.Items {
		d := &deps.Items[i]
		shard, err := strconv.Atoi(d.Labels[LabelShard])
		if err != nil || !ownedBy(d.OwnerReferences, job) || int32(shard) < paramShards(job) {
			continue
		}
		if err := r.Delete(ctx, d, client.Preconditions{UID: &d.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", d.Name, err))
		}
	}
	if r.KnativeAvailable && !managedKnative(job) {
		errs = append(errs, r.deleteOwned(ctx, job, KnativeServiceGVK, knativeServiceName(job)))
	}
	if r.KueueAvailable && queueName(job) == "" {
		errs = append(errs, r.deleteOwned(ctx, job, WorkloadGVK, workloadName(job))) // no longer queued: free its quota
	}
	if !partitioning(job) { // the step reported: its Job and pod are done with
		errs = append(errs, r.deleteOwned(ctx, job, batchv1.SchemeGroupVersion.WithKind("Job"), partitionJobName(job)))
	}
	return errors.Join(errs...)
}

// deleteOwned deletes the job's child of kind gvk named name, if it has one.
func (r *GNNTrainingJobReconciler) deleteOwned(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, gvk schema.GroupVersionKind, name string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !ownedBy(u.GetOwnerReferences(), job):
		return nil
	}
	uid := u.GetUID()
	return client.IgnoreNotFound(r.Delete(ctx, u, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

// observe reads the children's readiness and the pods' failures from the
// cache.
func (r *GNNTrainingJobReconciler) observe(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob) (observation, error) {
	obs := observation{knativeReady: true}
	var sts appsv1.StatefulSet
	var ownSts *appsv1.StatefulSet
	switch err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: graphServerName(job)}, &sts); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return obs, err
	case ownedBy(sts.OwnerReferences, job):
		ownSts = &sts
		if sts.Status.ObservedGeneration >= sts.Generation {
			obs.graphReady = sts.Status.ReadyReplicas
		}
	}
	var deps appsv1.DeploymentList
	if err := r.List(ctx, &deps, client.InNamespace(job.Namespace), client.MatchingLabels(selectorLabels(job, RoleParamServer))); err != nil {
		return obs, err
	}
	var ownDeps []appsv1.Deployment
	for i := range deps.Items {
		d := &deps.Items[i]
		shard, err := strconv.Atoi(d.Labels[LabelShard])
		if err != nil || int32(shard) >= paramShards(job) || !ownedBy(d.OwnerReferences, job) {
			continue
		}
		ownDeps = append(ownDeps, *d)
		if d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= 1 {
			obs.paramReady++
		}
	}
	if managedKnative(job) && r.KnativeAvailable {
		ks := &unstructured.Unstructured{}
		ks.SetGroupVersionKind(KnativeServiceGVK)
		err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: knativeServiceName(job)}, ks)
		if err != nil && !apierrors.IsNotFound(err) {
			return obs, err
		}
		obs.knativeReady = err == nil && knativeServiceReady(ks)
	}
	var pods corev1.PodList
	var err error
	if err = r.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{LabelJobName: job.Name}); err != nil {
		return obs, err
	}
	obs.pods = pods.Items
	obs.rolledOut = rolledOutRun(ownSts, ownDeps)
	obs.failure = firstFailure(job, pods.Items)
	if obs.partitionFailure, err = r.partitionFailure(ctx, job, pods.Items); err != nil {
		return obs, err
	}
	obs.startProblems, obs.starting, err = r.startProblems(ctx, ownSts, ownDeps, pods.Items)
	return obs, err
}

// rolledOutRun is the run (LabelRun) of the pod template that the graph
// servers' StatefulSet and every parameter-server Deployment carry and their
// controllers have observed, or -1 while one has not yet observed its newest
// spec, their runs differ or there are none: a pod of an earlier run deleted
// before then could be made again from the earlier template.
func rolledOutRun(sts *appsv1.StatefulSet, deps []appsv1.Deployment) int {
	run := -1
	observed := func(gen, observedGen int64, tmpl map[string]string) bool {
		r, err := strconv.Atoi(tmpl[LabelRun])
		if err != nil || observedGen < gen || (run >= 0 && r != run) {
			return false
		}
		run = r
		return true
	}
	if sts == nil || !observed(sts.Generation, sts.Status.ObservedGeneration, sts.Spec.Template.Labels) {
		return -1
	}
	for i := range deps {
		if d := &deps[i]; !observed(d.Generation, d.Status.ObservedGeneration, d.Spec.Template.Labels) {
			return -1
		}
	}
	return run
}

// knativeServiceReady reads the Ready condition of a Knative Service.
func knativeServiceReady(ks *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(ks.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Ready" {
			return m["status"] == string(corev1.ConditionTrue)
		}
	}
	return false
}

// ownedBy reports whether refs name job as controller.
func ownedBy(refs []metav1.OwnerReference, job *dorylusv1alpha1.GNNTrainingJob) bool {
	for _, ref := range refs {
		if ref.UID == job.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
