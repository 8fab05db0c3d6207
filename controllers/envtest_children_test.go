package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// TestCreateMakesEveryChild creates a job as a user would and checks every
// child, field by field where the operator owns the field.
func TestCreateMakesEveryChild(t *testing.T) {
	ns := newNamespace(t)
	job := createJob(t, userJob(ns, "cora", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.GraphServers.Replicas = 2
		j.Spec.ParameterServers.Replicas = 2
		j.Spec.GraphServers.NodeSelector = map[string]string{corev1.LabelInstanceTypeStable: "r5.xlarge"}
		j.Spec.RunPolicy.BudgetUSD = ptr.To[dorylusv1alpha1.Decimal]("0.25")
	}))
	got := waitCondition(t, ns, "cora", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, dorylusv1alpha1.ReasonChildrenCreated)

	// Defaults the API server applied, as the operator sees them.
	if diff := cmp.Diff(dorylusv1alpha1.ModelSpec{Architecture: "GCN", Layers: 2, Hidden: 16, Dropout: "0.5"}, got.Spec.Model); diff != "" {
		t.Errorf("defaulted model (-want +got):\n%s", diff)
	}
	if got.Spec.TensorBackend.CPU == nil || got.Spec.RunPolicy.BackoffLimit == nil || *got.Spec.RunPolicy.BackoffLimit != 3 {
		t.Errorf("defaults: tensorBackend %+v, backoffLimit %v; want cpu and 3", got.Spec.TensorBackend, got.Spec.RunPolicy.BackoffLimit)
	}

	owner := metav1.OwnerReference{APIVersion: "dorylus.dev/v1alpha1", Kind: "GNNTrainingJob", Name: "cora",
		UID: got.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	children := map[string]client.Object{
		"cora-runtime": &corev1.ServiceAccount{}, "cora-config": &corev1.ConfigMap{},
		"cora-gs": &corev1.Service{}, "cora-ps": &corev1.Service{},
		"cora-ps-0": &appsv1.Deployment{}, "cora-ps-1": &appsv1.Deployment{},
	}
	for name, obj := range children {
		if err := getObj(t, ns, name, obj); err != nil {
			t.Fatalf("child %s: %v", name, err)
		}
		if diff := cmp.Diff([]metav1.OwnerReference{owner}, obj.GetOwnerReferences()); diff != "" {
			t.Errorf("%s owner references (-want +got):\n%s", name, diff)
		}
		if obj.GetLabels()[LabelJobName] != "cora" || obj.GetLabels()[ManagedByLabel] != "dorylus-operator" {
			t.Errorf("%s labels %v lack the job and managed-by labels", name, obj.GetLabels())
		}
	}
	var role rbacv1.Role
	if err := getObj(t, ns, "cora-runtime", &role); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]rbacv1.PolicyRule{{APIGroups: []string{"dorylus.dev"}, Resources: []string{"gnntrainingjobs/status"},
		ResourceNames: []string{"cora"}, Verbs: []string{"get", "patch"}}}, role.Rules); diff != "" {
		t.Errorf("Role rules (-want +got):\n%s", diff)
	}
	var binding rbacv1.RoleBinding
	if err := getObj(t, ns, "cora-runtime", &binding); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "cora-runtime", Namespace: ns}}, binding.Subjects); diff != "" {
		t.Errorf("RoleBinding subjects (-want +got):\n%s", diff)
	}

	// The run config the pods read.
	cm := children["cora-config"].(*corev1.ConfigMap)
	cfg, err := jobconfig.Parse([]byte(cm.Data[jobconfig.ConfigMapKey]))
	if err != nil {
		t.Fatalf("run.json does not load: %v", err)
	}
	wantPeers := []string{fmt.Sprintf("cora-gs-0.cora-gs.%s.svc:5000", ns), fmt.Sprintf("cora-gs-1.cora-gs.%s.svc:5000", ns)}
	wantShards := []string{fmt.Sprintf("cora-ps-0.cora-ps.%s.svc:5100", ns), fmt.Sprintf("cora-ps-1.cora-ps.%s.svc:5100", ns)}
	if diff := cmp.Diff(wantPeers, cfg.GraphServers.Peers); diff != "" {
		t.Errorf("peers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantShards, cfg.ParameterServers.Shards); diff != "" {
		t.Errorf("shards (-want +got):\n%s", diff)
	}
	if cfg.Job.UID != string(got.UID) || cfg.Training.Epochs != 200 || cfg.Model.Dropout != 0.5 {
		t.Errorf("run config job/training/model: %+v %+v %+v", cfg.Job, cfg.Training, cfg.Model)
	}
	// The cost section: the operator's price list, the graph servers' type from their node
	// selector, the parameter servers' from the operator's default, the budget.
	wantCost := &jobconfig.Cost{Prices: &testPricing.Prices, GraphServerInstance: "r5.xlarge",
		ParameterServerInstance: testPricing.ParameterServerInstance, BudgetUSD: 0.25}
	if diff := cmp.Diff(wantCost, cfg.Cost); diff != "" {
		t.Errorf("cost (-want +got):\n%s", diff)
	}

	// The graph servers: the builder's output, with the API server's defaults on top.
	// The servers run once the start is recorded, a reconcile after Created.
	var sts appsv1.StatefulSet
	eventually(t, "graph servers scaled to 2", func() error {
		if err := getObj(t, ns, "cora-gs", &sts); err != nil {
			return err
		}
		if *sts.Spec.Replicas != 2 {
			return fmt.Errorf("replicas %d", *sts.Spec.Replicas)
		}
		return nil
	})
	if sts.Spec.ServiceName != "cora-gs" || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("StatefulSet service %q policy %q", sts.Spec.ServiceName, sts.Spec.PodManagementPolicy)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if c.Image != testImage || !cmp.Equal(c.Args, []string{"graph-server", "--config", "/etc/dorylus/run.json", "--partition", "$(DORYLUS_PARTITION)", "--startup-timeout", "0", "--metrics-address", ":9090", "--health-address", ":5001"}) {
		t.Errorf("graph-server container image %q args %q", c.Image, c.Args)
	}
	if d, err := configDigest(cfg); err != nil || sts.Spec.Template.Annotations[AnnotationConfigHash] != d {
		t.Errorf("pod template config hash %q does not match run.json", sts.Spec.Template.Annotations[AnnotationConfigHash])
	}
	var gsSvc corev1.Service
	if err := getObj(t, ns, "cora-gs", &gsSvc); err != nil {
		t.Fatal(err)
	}
	if gsSvc.Spec.ClusterIP != corev1.ClusterIPNone || !gsSvc.Spec.PublishNotReadyAddresses {
		t.Errorf("graph Service clusterIP %q publishNotReady %v; want headless, publishing", gsSvc.Spec.ClusterIP, gsSvc.Spec.PublishNotReadyAddresses)
	}
	ps1 := children["cora-ps-1"].(*appsv1.Deployment)
	if p := ps1.Spec.Template.Spec; p.Hostname != "cora-ps-1" || p.Subdomain != "cora-ps" || *p.AutomountServiceAccountToken {
		t.Errorf("shard 1 hostname %q subdomain %q automount %v", p.Hostname, p.Subdomain, *p.AutomountServiceAccountToken)
	}

	st := got.Status
	if st.StartTime == nil || !st.StartTime.Time.Equal(fakeClock.Now().Truncate(time.Second)) && st.StartTime.After(fakeClock.Now()) {
		t.Errorf("startTime %v, want set from the fake clock", st.StartTime)
	}
	if diff := cmp.Diff(dorylusv1alpha1.ServerStatus{Replicas: 2}, st.GraphServers); diff != "" {
		t.Errorf("status.graphServers (-want +got):\n%s", diff)
	}
	_ = job
}

// TestChildrenAreReappliedAndPruned checks that a child changed behind the
// operator's back is put back, and that shards above the replica count go.
func TestChildrenAreReappliedAndPruned(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "prune", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.Suspend = ptr.To(true) // not started: the spec may still change
		j.Spec.ParameterServers.Replicas = 2
	}))
	waitCondition(t, ns, "prune", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	eventually(t, "shard 1 exists", func() error { return getObj(t, ns, "prune-ps-1", &appsv1.Deployment{}) })

	var cm corev1.ConfigMap
	if err := getObj(t, ns, "prune-config", &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[jobconfig.ConfigMapKey] = "{}"
	if err := k8sClient.Update(context.Background(), &cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "run.json restored", func() error {
		if err := getObj(t, ns, "prune-config", &cm); err != nil {
			return err
		}
		_, err := jobconfig.Parse([]byte(cm.Data[jobconfig.ConfigMapKey]))
		return err
	})

	if err := updateJob(t, ns, "prune", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.ParameterServers.Replicas = 1
		j.Spec.Model.Layers = 3
	}); err != nil {
		t.Fatalf("changing a job that has not started: %v", err)
	}
	eventually(t, "shard 1 pruned", func() error {
		err := getObj(t, ns, "prune-ps-1", &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("shard 1 still there (err %v)", err)
	})
	eventually(t, "run.json follows the spec", func() error {
		if err := getObj(t, ns, "prune-config", &cm); err != nil {
			return err
		}
		cfg, err := jobconfig.Parse([]byte(cm.Data[jobconfig.ConfigMapKey]))
		if err != nil {
			return err
		}
		if cfg.Model.Layers != 3 || cfg.ParameterServers.Replicas != 1 {
			return fmt.Errorf("layers %d shards %d", cfg.Model.Layers, cfg.ParameterServers.Replicas)
		}
		return nil
	})
}

// TestManagedKnativeService checks the unstructured Knative child and that
// Ready waits for it.
func TestManagedKnativeService(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "kn", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			Service: &dorylusv1alpha1.KnativeServiceTemplate{MaxScale: 20}}}
	}))
	waitCondition(t, ns, "kn", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(KnativeServiceGVK)
	if err := getObj(t, ns, "kn-fn", ks); err != nil {
		t.Fatalf("Knative Service: %v", err)
	}
	if refs := ks.GetOwnerReferences(); len(refs) != 1 || refs[0].Name != "kn" || !*refs[0].Controller {
		t.Errorf("Knative Service owners %+v", refs)
	}
	args, _, _ := unstructured.NestedSlice(ks.Object, "spec", "template", "spec", "containers")
	if len(args) != 1 || args[0].(map[string]any)["image"] != testImage {
		t.Errorf("Knative containers %v", args)
	}
	maxScale, _, _ := unstructured.NestedString(ks.Object, "spec", "template", "metadata", "annotations", annotationMaxScale)
	if maxScale != "20" {
		t.Errorf("max-scale %q, want 20", maxScale)
	}

	setStatefulSetReady(t, ns, "kn-gs", 1)
	setDeploymentAvailable(t, ns, "kn-ps-0")
	eventually(t, "Ready waits for Knative", func() error {
		c := findCond(getJob(t, ns, "kn"), dorylusv1alpha1.ConditionReady)
		if want := "graph servers 1/1 ready, parameter servers 1/1 ready, Knative Service not ready"; c == nil ||
			c.Status != metav1.ConditionFalse || c.Message != want {
			return fmt.Errorf("Ready %+v, want False with message %q", c, want)
		}
		return nil
	})
	eventually(t, "Knative status", func() error {
		if err := getObj(t, ns, "kn-fn", ks); err != nil {
			return err
		}
		_ = unstructured.SetNestedSlice(ks.Object, []any{map[string]any{"type": "Ready", "status": "True"}}, "status", "conditions")
		return k8sClient.Status().Update(context.Background(), ks)
	})
	waitCondition(t, ns, "kn", dorylusv1alpha1.ConditionReady, metav1.ConditionTrue, dorylusv1alpha1.ReasonServersReady)
}

// TestManagedByAnotherController leaves a job alone.
func TestManagedByAnotherController(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "foreign", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
	}))
	createJob(t, userJob(ns, "ours"))
	waitCondition(t, ns, "ours", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	res := reconcileNow(t, ns, "foreign")
	if res != (reconcile.Result{}) {
		t.Errorf("reconcile of a foreign job returned %+v", res)
	}
	job := getJob(t, ns, "foreign")
	if len(job.Status.Conditions) != 0 {
		t.Errorf("foreign job got conditions %+v", job.Status.Conditions)
	}
	if err := getObj(t, ns, "foreign-gs", &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("foreign job got a StatefulSet (err %v)", err)
	}
}

func findCond(job *dorylusv1alpha1.GNNTrainingJob, typ string) *metav1.Condition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == typ {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}
