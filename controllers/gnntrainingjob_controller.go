// Package controllers holds the GNNTrainingJob reconciler: pure builders of
// the child objects (one file per kind), one file per run policy (children,
// status, suspend, ttl, failure), and the reconcile loop that ties them
// together with one status write per reconcile and events after it.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// RBAC: each verb below is one the reconciler uses (TestChartRBAC lists what
// for); no Secret is ever read (credentials.go).
// +kubebuilder:rbac:groups=dorylus.dev,resources=gnntrainingjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=dorylus.dev,resources=gnntrainingjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=dorylus.dev,resources=gnntrainingjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services;serviceaccounts,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=serving.knative.dev,resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=update
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=resourceflavors;workloadpriorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// GNNTrainingJobReconciler reconciles GNNTrainingJobs.
type GNNTrainingJobReconciler struct {
	client.Client
	// Recorder emits events.k8s.io events about jobs.
	Recorder events.EventRecorder
	// Clock is the time source of every deadline, TTL and timestamp.
	Clock clock.PassiveClock
	// RuntimeImage is the image of the job's pods unless spec.image is set.
	RuntimeImage string
	// APIReader reads what the cache does not hold: the events that say why
	// a pod cannot start. Nil: no events are read.
	APIReader client.Reader
	// KnativeAvailable says whether the cluster serves serving.knative.dev/v1
	// Services; without it, managed Knative backends are refused in status.
	KnativeAvailable bool
	// KueueAvailable says whether the cluster serves kueue.x-k8s.io/v1beta2
	// Workloads; without it, the queue-name label is ignored (kueue.go).
	KueueAvailable bool
	// Pricing prices the jobs (pricing.go).
	Pricing Pricing
	// MetricsScrapers selects the namespaces whose pods may reach the
	// servers' metrics port (buildNetworkPolicy); empty selects every one.
	MetricsScrapers metav1.LabelSelector
}

// Reconcile brings one job's children and status in line with its spec.
func (r *GNNTrainingJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	job := &dorylusv1alpha1.GNNTrainingJob{}
	if err := r.Get(ctx, req.NamespacedName, job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !managedByUs(job) || !job.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// Timestamps are stored at the API's one-second precision; requeues are
	// computed from the exact clock.
	exact := r.Clock.Now()
	now := metav1.NewTime(exact).Rfc3339Copy()

	// A finished job waits for its TTL in the reconciles below, which keep
	// its servers at zero and its Workload Finished (nextWake).
	if expired, _, ok := ttlExpiry(job, exact); ok && expired {
		uid := job.UID
		if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &uid}); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, "TTLExpired", "Delete",
			"deleted %ds after it finished (spec.runPolicy.ttlSecondsAfterFinished)", *job.Spec.RunPolicy.TTLSecondsAfterFinished)
		return ctrl.Result{}, nil
	}

	obs, err := r.observe(ctx, job)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("observe children: %w", err)
	}
	finished := isFinished(job)
	var queue *queueState
	var queueErr error
	if r.KueueAvailable && queueName(job) != "" {
		if queue, queueErr = r.syncWorkload(ctx, job, finished); queue.holds() {
			job = heldByQueue(job)
		}
	}
	in := statusInput{obs: obs, now: now, knativeMissing: managedKnative(job) && !r.KnativeAvailable, queue: queue}
	var settle time.Duration
	if !finished {
		running := !isSuspended(job)
		start := nextStartTime(job, running, now)
		in.verdict = decide(job, start, exact)
		if in.verdict == nil && obs.partitionFailure != "" {
			in.verdict = &verdict{dorylusv1alpha1.ConditionFailed, dorylusv1alpha1.ReasonPartitioningFailed, obs.partitionFailure}
		}
		if running && obs.failure != nil && (in.verdict == nil || in.verdict.reason == dorylusv1alpha1.ReasonTrainingError) {
			// A server failed: what graph server 0 reports now is a consequence.
			in.verdict = nil
			if settle = settling(obs.failure, exact); settle == 0 {
				in.verdict = failureVerdict(job, obs.failure)
				in.restart = in.verdict == nil
			}
		}
	}
	// Children are applied from the status the job holds, never from the
	// one this reconcile is about to write: a start (the first, or a
	// resume), a restart and the end are recorded before the servers change
	// for them, and the write wakes the reconcile that changes them. So a
	// reconcile that reads the job before the cache holds the write applies
	// what is applied already, not the previous run's templates or servers
	// scaled up again, and a refused write changes nothing.
	running := !finished && !isSuspended(job)
	recorded := nextStartTime(job, running, now).Equal(job.Status.StartTime)
	in.applyErr = errors.Join(queueErr, r.applyChildren(ctx, withPlacement(job, queue), running && recorded, credentialsPeriod(job.Status.StartTime, job.Status.Restarts)))

	status := computeStatus(job, in)
	if !equality.Semantic.DeepEqual(job.Status, status) {
		err := r.writeStatus(ctx, job, status)
		if apierrors.IsConflict(err) {
			err = r.rewriteStatusAfterProgress(ctx, job, status)
		}
		switch {
		case apierrors.IsConflict(err):
			// The status was computed from a stale read; look again once
			// the cache holds the newer version.
			return ctrl.Result{RequeueAfter: conflictRecheck}, in.applyErr
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("write status: %w", err)
		}
		r.emitEvents(job, job.Status.Conditions, status.Conditions)
		if in.restart {
			r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, "Restarting", "Restart",
				"%s; restarting every server from the last checkpoint (restart %d)", obs.failure.message, status.Restarts)
		}
	}
	if err := r.settleWorkload(ctx, job, queue, len(obs.pods), now); err != nil {
		return ctrl.Result{}, err
	}
	if running {
		current := job.DeepCopy()
		current.Status = status
		// Old pods wait for every server controller to observe the current
		// run's template: its status write wakes the next reconcile.
		if old := oldPods(current, obs.pods); len(old) > 0 && obs.rolledOut == int(status.Restarts) {
			if err := r.deleteOldPods(ctx, old); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if in.applyErr != nil {
		return ctrl.Result{}, in.applyErr
	}
	wake := r.nextWake(job, status, exact)
	if running && (obs.starting || len(obs.startProblems) > 0) && (wake == 0 || wake > startRecheck) {
		// Pods still starting: kubelet events, which wake nothing, may
		// say why, or the cause they named may be gone.
		wake = startRecheck
	}
	if settle > 0 && (wake == 0 || wake > settle) {
		wake = settle
	}
	return ctrl.Result{RequeueAfter: wake}, nil
}

// nextWake is when a time-based policy next needs a reconcile: the TTL of a
// finished job, the active deadline of a running one or, while it trains,
// the refresh of its estimate; 0 for none.
func (r *GNNTrainingJobReconciler) nextWake(job *dorylusv1alpha1.GNNTrainingJob, status dorylusv1alpha1.GNNTrainingJobStatus, now time.Time) time.Duration {
	next := job.DeepCopy()
	next.Status = status
	if _, after, ok := ttlExpiry(next, now); ok {
		if after == 0 {
			return time.Nanosecond
		}
		return after
	}
	if isFinished(next) {
		return 0
	}
	left, _ := deadlineLeft(next, status.StartTime, now)
	if next.Spec.Inference == nil && meta.IsStatusConditionTrue(status.Conditions, dorylusv1alpha1.ConditionTraining) && (left == 0 || left > etaRefresh) {
		left = etaRefresh // to refresh the estimate
	}
	return left
}

// writeStatus applies every status field the operator owns (all but
// progress, less its estimate, and partitions) with server-side apply, in one
// request: an estimate it no longer sends is removed. The job's
// resourceVersion is a precondition: a status computed from a stale cached
// read (which could, say, reset completionTime) is refused with a conflict.
func (r *GNNTrainingJobReconciler) writeStatus(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, status dorylusv1alpha1.GNNTrainingJobStatus) error {
	var estimate *dorylusv1alpha1.CompletionEstimate
	if status.Progress != nil {
		estimate = status.Progress.Estimate
	}
	status.Progress, status.Partitions = nil, nil // graph server 0's and the partition step's
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return err
	}
	for k, v := range m {
		// Empty structs convert to a typed nil map, sent as null, which the
		// schema refuses; an absent field means the same.
		if mm, ok := v.(map[string]any); v == nil || ok && len(mm) == 0 {
			delete(m, k)
		}
	}
	if estimate != nil {
		e, err := runtime.DefaultUnstructuredConverter.ToUnstructured(estimate)
		if err != nil {
			return err
		}
		m["progress"] = map[string]any{"estimate": e}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": m}}
	u.SetGroupVersionKind(dorylusv1alpha1.GroupVersion.WithKind("GNNTrainingJob"))
	u.SetName(job.Name)
	u.SetNamespace(job.Namespace)
	u.SetResourceVersion(job.ResourceVersion)
	return r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// rewriteStatusAfterProgress writes status again on the job's newest
// version when the write was refused only because graph server 0 reported
// progress since the job was read (about once a second): the status stays
// right, since a progress report that ends the job wakes a reconcile of its
// own. Any other change returns the conflict, for a new reconcile.
func (r *GNNTrainingJobReconciler) rewriteStatusAfterProgress(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, status dorylusv1alpha1.GNNTrainingJobStatus) error {
	conflict := apierrors.NewConflict(dorylusv1alpha1.GroupVersion.WithResource("gnntrainingjobs").GroupResource(), job.Name,
		fmt.Errorf("the job changed since it was read"))
	if r.APIReader == nil {
		return conflict
	}
	for range 3 {
		fresh := &dorylusv1alpha1.GNNTrainingJob{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
			return err
		}
		if !progressOnly(job, fresh) {
			return conflict
		}
		if err := r.writeStatus(ctx, fresh, status); !apierrors.IsConflict(err) {
			return err
		}
	}
	return conflict
}

// managedByUs reports whether spec.managedBy leaves the job to this operator.
func managedByUs(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return job.Spec.ManagedBy == nil || *job.Spec.ManagedBy == dorylusv1alpha1.ControllerName
}

// Options tunes the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of jobs reconciled at once.
	MaxConcurrentReconciles int
}

// SetupWithManager registers the reconciler: it watches jobs managed by this
// operator (less progress reports that do not end them), owns every child kind, and maps the job's pods back to it when
// their restart counts change.
func (r *GNNTrainingJobReconciler) SetupWithManager(mgr ctrl.Manager, opts Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("gnntrainingjob").
		For(&dorylusv1alpha1.GNNTrainingJob{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			job, ok := o.(*dorylusv1alpha1.GNNTrainingJob)
			return ok && managedByUs(job)
		}), jobUpdateMatters())).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&appsv1.Deployment{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToJob), builder.WithPredicates(podStatusChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)})
	if r.KnativeAvailable {
		ks := &unstructured.Unstructured{}
		ks.SetGroupVersionKind(KnativeServiceGVK)
		b = b.Owns(ks)
	}
	if r.KueueAvailable {
		wl := &unstructured.Unstructured{}
		wl.SetGroupVersionKind(WorkloadGVK)
		b = b.Owns(wl)
	}
	return b.Complete(r)
}

// podToJob maps a server pod to its job through LabelJobName.
func podToJob(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[LabelJobName]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// podStatusChanged passes pod creations, deletions and updates that change
// how a server ended or why the pod cannot start, the only pod facts the
// reconciler uses.
func podStatusChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, ok1 := e.ObjectOld.(*corev1.Pod)
			newPod, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return false
			}
			oldProblem, oldStarting := podStartProblem(oldPod)
			newProblem, newStarting := podStartProblem(newPod)
			return failureMessage(oldPod) != failureMessage(newPod) || oldProblem != newProblem || oldStarting != newStarting
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
