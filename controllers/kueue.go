package controllers

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Kueue policy: on a cluster that serves Kueue's Workloads, a job labelled
// kueue.x-k8s.io/queue-name gets a Workload (kueue.x-k8s.io/v1beta2) owned by
// the job, with one pod set per server role, and runs only while Kueue admits
// it: until then, and after Kueue evicts it, the operator treats it as
// suspended (servers at zero, children and progress kept, Suspended true with
// the reason), without writing spec.runPolicy.suspend. A job the user
// suspends deactivates its Workload (spec.active false), so Kueue releases
// its quota. Admitted, the servers run with the node labels and tolerations
// of the flavors Kueue assigned. Evicted, the servers stop, and once their
// pods are gone the operator clears the admission, as Kueue's own job
// integrations do, so that the quota goes to the preemptor. A finished job
// marks its Workload Finished. Without Kueue the label changes nothing.

const (
	// LabelQueueName names the Kueue LocalQueue a job waits in.
	LabelQueueName = "kueue.x-k8s.io/queue-name"
	// LabelPriorityClass names the Kueue WorkloadPriorityClass of a job.
	LabelPriorityClass = "kueue.x-k8s.io/priority-class"
	// PodSetGraphServers and PodSetParamServers name the Workload's pod sets.
	PodSetGraphServers = "graph-servers"
	PodSetParamServers = "param-servers"
)

// WorkloadGVK is the Kueue Workload the operator writes.
var WorkloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

var (
	resourceFlavorGVK        = WorkloadGVK.GroupVersion().WithKind("ResourceFlavor")
	workloadPriorityClassGVK = WorkloadGVK.GroupVersion().WithKind("WorkloadPriorityClass")
)

// Workload condition types and reasons the operator reads or writes.
const (
	workloadAdmitted      = "Admitted"
	workloadEvicted       = "Evicted"
	workloadFinished      = "Finished"
	workloadQuotaReserved = "QuotaReserved"
	workloadRequeued      = "Requeued"
)

// KueueServed reports whether the API server serves Kueue's Workloads.
func KueueServed(mapper meta.RESTMapper) (bool, error) { return served(mapper, WorkloadGVK) }

// queueName is the LocalQueue the job waits in; "" when not queued.
func queueName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Labels[LabelQueueName] }

// workloadName names the job's Workload.
func workloadName(job *dorylusv1alpha1.GNNTrainingJob) string { return "gnntrainingjob-" + job.Name }

// queueState is what one reconcile saw of a queued job's Workload.
type queueState struct {
	workload, queue string
	// admitted: Kueue admitted the Workload and has not evicted it.
	admitted bool
	// clusterQueue admitted it (while admitted).
	clusterQueue string
	// evicted is Kueue's Evicted condition while true.
	evicted *metav1.Condition
	// pending says why Kueue has not reserved quota, in its words.
	pending string
	// holdsQuota: status.admission is set.
	holdsQuota bool
	// placement is what the admitted flavors add to each pod set's pods.
	placement map[string]placement
	// userSuspended: spec.runPolicy.suspend is true (the Workload is
	// inactive).
	userSuspended bool
	// obj is the Workload as read.
	obj *unstructured.Unstructured
}

// placement is a flavor's node labels and tolerations.
type placement struct {
	nodeLabels  map[string]string
	tolerations []corev1.Toleration
}

// holds reports whether the queue keeps the job from running.
func (q *queueState) holds() bool { return q != nil && !q.admitted }

// suspendedCondition is the Suspended condition Kueue's decision gives.
func (q *queueState) suspendedCondition() metav1.Condition {
	c := metav1.Condition{Type: dorylusv1alpha1.ConditionSuspended, Status: metav1.ConditionTrue}
	switch {
	case q.admitted:
		c.Status, c.Reason = metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted
		c.Message = fmt.Sprintf("Kueue admitted Workload %s in ClusterQueue %s", q.workload, q.clusterQueue)
	case q.evicted != nil:
		c.Reason = dorylusv1alpha1.ReasonEvicted
		c.Message = fmt.Sprintf("Kueue evicted Workload %s (%s: %s); every server is scaled to zero until it is admitted again in LocalQueue %s",
			q.workload, q.evicted.Reason, q.evicted.Message, q.queue)
	default:
		c.Reason = dorylusv1alpha1.ReasonWaitingForAdmission
		c.Message = fmt.Sprintf("waiting for Kueue to admit Workload %s in LocalQueue %s; every server is scaled to zero", q.workload, q.queue)
		if q.pending != "" {
			c.Message += ": " + q.pending
		}
	}
	return c
}

// withPlacement is the job with the admitted flavors' node labels and
// tolerations added to its servers' pods.
func withPlacement(job *dorylusv1alpha1.GNNTrainingJob, q *queueState) *dorylusv1alpha1.GNNTrainingJob {
	if q == nil || !q.admitted || len(q.placement) == 0 {
		return job
	}
	out := job.DeepCopy()
	for set, p := range map[string]*dorylusv1alpha1.ServerPodSpec{
		PodSetGraphServers: &out.Spec.GraphServers.ServerPodSpec,
		PodSetParamServers: &out.Spec.ParameterServers.ServerPodSpec,
	} {
		pl := q.placement[set]
		if len(pl.nodeLabels) > 0 {
			sel := maps.Clone(p.NodeSelector)
			if sel == nil {
				sel = map[string]string{}
			}
			maps.Copy(sel, pl.nodeLabels)
			p.NodeSelector = sel
		}
		p.Tolerations = append(p.Tolerations, pl.tolerations...)
	}
	return out
}

// buildWorkload is the job's Workload: one pod set per server role with the
// servers' requests, scheduling constraints and counts, in the job's queue,
// active unless the user suspended the job; priority (when labelled) names a
// WorkloadPriorityClass and its value.
func buildWorkload(job *dorylusv1alpha1.GNNTrainingJob, priority *workloadPriority) (*unstructured.Unstructured, error) {
	podSet := func(name, container string, count int32, p *dorylusv1alpha1.ServerPodSpec) (map[string]any, error) {
		// The servers' pod spec less what does not place or size them.
		spec := serverPodSpec(job, p, false).WithContainers(corev1ac.Container().WithName(container).WithResources(resources(p.Resources)))
		spec.ServiceAccountName, spec.AutomountServiceAccountToken, spec.EnableServiceLinks, spec.SecurityContext, spec.ImagePullSecrets = nil, nil, nil, nil, nil
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
		if err != nil {
			return nil, fmt.Errorf("pod set %s: %w", name, err)
		}
		return map[string]any{"name": name, "count": int64(count), "template": map[string]any{"spec": m}}, nil
	}
	gs, err := podSet(PodSetGraphServers, RoleGraphServer, job.Spec.GraphServers.Replicas, &job.Spec.GraphServers.ServerPodSpec)
	if err != nil {
		return nil, err
	}
	ps, err := podSet(PodSetParamServers, RoleParamServer, paramShards(job), &job.Spec.ParameterServers.ServerPodSpec)
	if err != nil {
		return nil, err
	}
	spec := map[string]any{"queueName": queueName(job), "active": !isSuspended(job), "podSets": []any{gs, ps}}
	if priority != nil {
		spec["priorityClassRef"] = map[string]any{"group": workloadPriorityClassGVK.Group, "kind": workloadPriorityClassGVK.Kind, "name": priority.name}
		spec["priority"] = int64(priority.value)
	}
	wl := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	wl.SetGroupVersionKind(WorkloadGVK)
	wl.SetName(workloadName(job))
	wl.SetNamespace(job.Namespace)
	wl.SetLabels(map[string]string{ManagedByLabel: "dorylus-operator", LabelJobName: job.Name})
	ref := ownerReference(job)
	wl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: *ref.APIVersion, Kind: *ref.Kind, Name: *ref.Name,
		UID: *ref.UID, Controller: ref.Controller, BlockOwnerDeletion: ref.BlockOwnerDeletion}})
	return wl, nil
}

// workloadPriority is a WorkloadPriorityClass's name and value.
type workloadPriority struct {
	name  string
	value int32
}

// syncWorkload applies the Workload of a queued job (unless it finished)
// and reads Kueue's decision from it, with the node labels and tolerations of
// the flavors it admitted.
func (r *GNNTrainingJobReconciler) syncWorkload(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, finished bool) (*queueState, error) {
	q := &queueState{workload: workloadName(job), queue: queueName(job), userSuspended: isSuspended(job)}
	if !finished {
		if err := r.applyWorkload(ctx, job); err != nil {
			return q, err
		}
	}
	return q, r.readWorkload(ctx, job, q)
}

// applyWorkload applies the job's Workload unless it is unchanged.
func (r *GNNTrainingJobReconciler) applyWorkload(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob) error {
	var priority *workloadPriority
	if name := job.Labels[LabelPriorityClass]; name != "" {
		pc := &unstructured.Unstructured{}
		pc.SetGroupVersionKind(workloadPriorityClassGVK)
		if err := r.Get(ctx, types.NamespacedName{Name: name}, pc); err != nil {
			return fmt.Errorf("WorkloadPriorityClass %s (label %s): %w", name, LabelPriorityClass, err)
		}
		v, _, _ := unstructured.NestedInt64(pc.Object, "value")
		priority = &workloadPriority{name: name, value: int32(v)}
	}
	desired, err := buildWorkload(job, priority)
	if err != nil {
		return err
	}
	ac := client.ApplyConfigurationFromUnstructured(desired)
	if r.unchanged(ctx, job.Namespace, ac) {
		return nil
	}
	if err := r.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply Workload %s: %w", desired.GetName(), err)
	}
	return nil
}

// readWorkload reads Kueue's decision into q.
func (r *GNNTrainingJobReconciler) readWorkload(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, q *queueState) error {
	wl := &unstructured.Unstructured{}
	wl.SetGroupVersionKind(WorkloadGVK)
	switch err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: q.workload}, wl); {
	case apierrors.IsNotFound(err):
		return nil // not cached yet: not admitted
	case err != nil:
		return err
	}
	q.obj = wl
	conds := workloadConditions(wl)
	if c := meta.FindStatusCondition(conds, workloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		q.evicted = c
	}
	if c := meta.FindStatusCondition(conds, workloadQuotaReserved); c != nil && c.Status == metav1.ConditionFalse {
		q.pending = c.Message
	}
	adm, holds, _ := unstructured.NestedMap(wl.Object, "status", "admission")
	q.holdsQuota = holds
	q.admitted = holds && q.evicted == nil && meta.IsStatusConditionTrue(conds, workloadAdmitted)
	if !q.admitted {
		return nil
	}
	q.clusterQueue, _, _ = unstructured.NestedString(adm, "clusterQueue")
	q.placement = map[string]placement{}
	assignments, _, _ := unstructured.NestedSlice(adm, "podSetAssignments")
	for _, a := range assignments {
		am, _ := a.(map[string]any)
		set, _, _ := unstructured.NestedString(am, "name")
		flavors, _, _ := unstructured.NestedStringMap(am, "flavors")
		pl := placement{nodeLabels: map[string]string{}}
		seen := map[string]bool{}
		for _, f := range flavors {
			if seen[f] {
				continue
			}
			seen[f] = true
			rf := &unstructured.Unstructured{}
			rf.SetGroupVersionKind(resourceFlavorGVK)
			if err := r.Get(ctx, types.NamespacedName{Name: f}, rf); err != nil {
				return fmt.Errorf("ResourceFlavor %s admitted for pod set %s: %w", f, set, err)
			}
			labels, _, _ := unstructured.NestedStringMap(rf.Object, "spec", "nodeLabels")
			maps.Copy(pl.nodeLabels, labels)
			var fs struct {
				Tolerations []corev1.Toleration `json:"tolerations"`
			}
			if spec, ok, _ := unstructured.NestedMap(rf.Object, "spec"); ok {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &fs); err != nil {
					return fmt.Errorf("ResourceFlavor %s: %w", f, err)
				}
			}
			pl.tolerations = append(pl.tolerations, fs.Tolerations...)
		}
		q.placement[set] = pl
	}
	return nil
}

// workloadConditions reads a Workload's status.conditions.
func workloadConditions(wl *unstructured.Unstructured) []metav1.Condition {
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if m, ok, _ := unstructured.NestedMap(wl.Object, "status"); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	}
	return st.Conditions
}

// settleWorkload writes back what the job's state means for its Workload: a
// finished job marks it Finished; an evicted job whose pods are gone gives
// its quota back (admission cleared, QuotaReserved false, Requeued).
func (r *GNNTrainingJobReconciler) settleWorkload(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, q *queueState, podsLeft int, now metav1.Time) error {
	if q == nil || q.obj == nil {
		return nil
	}
	wl := q.obj.DeepCopy()
	conds := workloadConditions(wl)
	set := func(c metav1.Condition) {
		c.LastTransitionTime, c.ObservedGeneration = now, wl.GetGeneration()
		meta.SetStatusCondition(&conds, c)
	}
	switch {
	case isFinished(job):
		if meta.IsStatusConditionTrue(conds, workloadFinished) {
			return nil
		}
		reason, msg := "Succeeded", "the GNNTrainingJob succeeded"
		if c := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
			reason, msg = "Failed", "the GNNTrainingJob failed: "+c.Message
		}
		set(metav1.Condition{Type: workloadFinished, Status: metav1.ConditionTrue, Reason: reason, Message: truncate(msg, 1024)})
	case q.evicted != nil && q.holdsQuota && podsLeft == 0:
		unstructured.RemoveNestedField(wl.Object, "status", "admission")
		set(metav1.Condition{Type: workloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: q.evicted.Message})
		set(metav1.Condition{Type: workloadAdmitted, Status: metav1.ConditionFalse, Reason: "NoReservation", Message: "The workload has no reservation"})
		requeued := metav1.ConditionFalse
		if q.evicted.Reason == "Preempted" || q.evicted.Reason == "NodeFailures" {
			requeued = metav1.ConditionTrue
		}
		set(metav1.Condition{Type: workloadRequeued, Status: requeued, Reason: q.evicted.Reason, Message: q.evicted.Message})
	default:
		return nil
	}
	list := make([]any, 0, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err != nil {
			return err
		}
		list = append(list, m)
	}
	if err := unstructured.SetNestedSlice(wl.Object, list, "status", "conditions"); err != nil {
		return err
	}
	// An update, not an apply: the admission belongs to Kueue's field
	// manager, and the resourceVersion refuses a stale read.
	if err := r.Status().Update(ctx, wl); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("update Workload %s status: %w", q.workload, err)
	}
	return nil
}
