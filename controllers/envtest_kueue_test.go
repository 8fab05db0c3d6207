package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/internal/testenv/kueue"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// The suite serves Kueue's CRDs (at the version hack/tools.sh pins) so that
// the operator's manager discovers Kueue; TestKueue runs the real Kueue
// manager against the suite's API server.
// kueueWebhookPort is where the Kueue manager serves its webhooks.
var kueueWebhookPort int

// kueueNamespace is Kueue's own namespace in the suite.
const kueueNamespace = "kueue-system"

// kueueVersion is the Kueue version hack/tools.sh pins.
func kueueVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join("..", "hack", "tools.sh"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`KUEUE_VERSION=\$\{KUEUE_VERSION:-(v[^}]+)\}`).FindSubmatch(b)
	if m == nil {
		return "", errors.New("hack/tools.sh pins no KUEUE_VERSION")
	}
	return string(m[1]), nil
}

// kueueCRDs reads Kueue's CRDs at the version hack/tools.sh pins, from the Go
// module cache, once the Kueue manager of that version is installed.
func kueueCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	version, err := kueueVersion()
	if err != nil {
		return nil, err
	}
	switch _, built, err := kueue.Binary(); {
	case err != nil:
		return nil, err
	case built != version:
		return nil, fmt.Errorf("the installed Kueue manager is %s, hack/tools.sh pins %s: run hack/tools.sh kueue", built, version)
	}
	dir, err := kueue.CRDDir(version)
	if err != nil {
		return nil, err
	}
	if kueueWebhookPort, err = kueue.FreePort(); err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no Kueue CRDs in %s (%v)", dir, err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// startKueue runs the Kueue manager for t with GNNTrainingJob as an external
// framework.
func startKueue(t *testing.T) {
	t.Helper()
	if !direct.KueueAvailable {
		t.Fatal("the operator did not discover Kueue's Workloads")
	}
	ctx := context.Background()
	// Kueue's certificate management injects its CA into the conversion
	// webhooks of five CRDs and waits until it has (envtest installs them
	// without: their types are not in its scheme), so those point at its
	// webhook server. Every client here reads and writes the storage version
	// (v1beta2): no conversion is ever called.
	conversion := fmt.Sprintf(`{"spec": {"conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
		"clientConfig": {"url": "https://127.0.0.1:%d/convert"}}}}}`, kueueWebhookPort)
	for _, plural := range []string{"localqueues", "clusterqueues", "workloads", "cohorts", "multikueueclusters"} {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + ".kueue.x-k8s.io"}}
		if err := k8sClient.Patch(ctx, crd, client.RawPatch(types.MergePatchType, []byte(conversion))); err != nil {
			t.Fatalf("conversion webhook of %s: %v", crd.Name, err)
		}
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kueueNamespace, Name: "kueue-webhook-server-cert"}},
	} {
		if err := k8sClient.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	admin, err := testEnv.AddUser(envtest.User{Name: "kueue-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kueue.Start(t, kc, kueue.Config{Namespace: kueueNamespace, WebhookPort: kueueWebhookPort,
		ExternalFrameworks: []string{"GNNTrainingJob.v1alpha1.dorylus.dev"}})
}

// kueueObject creates a Kueue object from YAML.
func kueueObject(t *testing.T, ns, manifest string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	if ns != "" {
		u.SetNamespace(ns)
	}
	if err := k8sClient.Create(context.Background(), u); err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), u) })
}

// getWorkload reads a job's Workload.
func getWorkload(t *testing.T, ns, job string) (*unstructured.Unstructured, error) {
	wl := &unstructured.Unstructured{}
	wl.SetGroupVersionKind(WorkloadGVK)
	return wl, k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "gnntrainingjob-" + job}, wl)
}

// waitSuspended waits until the job's Suspended condition has status and
// reason, and returns it.
func waitSuspended(t *testing.T, ns, job string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	j := waitCondition(t, ns, job, dorylusv1alpha1.ConditionSuspended, status, reason)
	return *meta.FindStatusCondition(j.Status.Conditions, dorylusv1alpha1.ConditionSuspended)
}

// TestKueue queues four jobs in a real Kueue (the manager binary, against
// the suite's API server) whose ClusterQueue has CPU for two: a and b
// (priority mid) are admitted and run, with the flavor's node label and
// toleration; c (low) waits suspended, saying so, until a finishes; then h
// (high) preempts c, which stops and gives its quota back; c runs again once
// h finishes.
func TestKueue(t *testing.T) {
	startKueue(t)
	ns := newNamespace(t)
	flavor, cq := ns+"-cpu", ns+"-cq"
	kueueObject(t, "", fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: %s},
  spec: {nodeLabels: {dorylus.dev/pool: cpu}, tolerations: [{key: dorylus.dev/pool, operator: Exists, effect: NoSchedule}]}}`, flavor))
	kueueObject(t, "", fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: ClusterQueue, metadata: {name: %s},
  spec: {namespaceSelector: {}, preemption: {withinClusterQueue: LowerPriority},
    resourceGroups: [{coveredResources: [cpu], flavors: [{name: %s, resources: [{name: cpu, nominalQuota: 400m}]}]}]}}`, cq, flavor))
	kueueObject(t, ns, fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq}, spec: {clusterQueue: %s}}`, cq))
	for name, value := range map[string]int{"low": 10, "mid": 50, "high": 100} {
		kueueObject(t, "", fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: WorkloadPriorityClass, metadata: {name: %s-%s}, value: %d}`, ns, name, value))
	}
	queued := func(priority string) func(*dorylusv1alpha1.GNNTrainingJob) {
		return func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Labels = map[string]string{LabelQueueName: "lq", LabelPriorityClass: ns + "-" + priority}
			cpu := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
			j.Spec.GraphServers.Resources, j.Spec.ParameterServers.Resources = cpu, cpu
			j.Spec.Training.Epochs = 5
			// A finished job waiting for its TTL still frees its quota.
			j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](3600)
		}
	}
	createJob(t, userJob(ns, "a", queued("mid")))
	createJob(t, userJob(ns, "b", queued("mid")))
	createJob(t, userJob(ns, "c", queued("low")))

	// The Workload: two pod sets with the servers' requests and counts, the
	// priority class and its value, owned by the job.
	var wl *unstructured.Unstructured
	eventually(t, "a's Workload", func() (err error) { wl, err = getWorkload(t, ns, "a"); return err })
	a := getJob(t, ns, "a")
	if q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName"); q != "lq" {
		t.Errorf("Workload queueName %q, want lq", q)
	}
	if ref, _, _ := unstructured.NestedStringMap(wl.Object, "spec", "priorityClassRef"); ref["kind"] != "WorkloadPriorityClass" || ref["group"] != "kueue.x-k8s.io" || ref["name"] != ns+"-mid" {
		t.Errorf("Workload priorityClassRef %v, want WorkloadPriorityClass %s-mid", ref, ns)
	}
	if p, _, _ := unstructured.NestedInt64(wl.Object, "spec", "priority"); p != 50 {
		t.Errorf("Workload priority %d, want 50", p)
	}
	if refs := wl.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != a.UID || refs[0].Kind != "GNNTrainingJob" || !ptr.Deref(refs[0].Controller, false) {
		t.Errorf("Workload owners %+v, want the job as controller", refs)
	}
	sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	want := []struct {
		name, container string
	}{{PodSetGraphServers, RoleGraphServer}, {PodSetParamServers, RoleParamServer}}
	if len(sets) != len(want) {
		t.Fatalf("Workload pod sets %v, want %d", sets, len(want))
	}
	for i, w := range want {
		set := sets[i].(map[string]any)
		containers, _, _ := unstructured.NestedSlice(set, "template", "spec", "containers")
		var cpu string
		if len(containers) == 1 {
			cpu, _, _ = unstructured.NestedString(containers[0].(map[string]any), "resources", "requests", "cpu")
		}
		if set["name"] != w.name || set["count"] != int64(1) || len(containers) != 1 || containers[0].(map[string]any)["name"] != w.container || cpu != "100m" {
			t.Errorf("pod set %d: %v; want %s, count 1, one container %s requesting cpu 100m", i, set, w.name, w.container)
		}
	}

	// Two admitted; the third waits, suspended, with Kueue's reason.
	for _, job := range []string{"a", "b"} {
		c := waitSuspended(t, ns, job, metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted)
		if !strings.Contains(c.Message, "ClusterQueue "+cq) {
			t.Errorf("%s admitted: %q does not name ClusterQueue %s", job, c.Message, cq)
		}
		waitScaled(t, ns, job, 1, 1)
	}
	var sts appsv1.StatefulSet
	if err := getObj(t, ns, "a-gs", &sts); err != nil {
		t.Fatal(err)
	}
	if sel, tol := sts.Spec.Template.Spec.NodeSelector, sts.Spec.Template.Spec.Tolerations; sel["dorylus.dev/pool"] != "cpu" ||
		len(tol) != 1 || tol[0].Key != "dorylus.dev/pool" || tol[0].Operator != corev1.TolerationOpExists {
		t.Errorf("admitted graph servers: node selector %v, tolerations %+v; want the flavor's label and toleration", sel, tol)
	}
	c := waitSuspended(t, ns, "c", metav1.ConditionTrue, dorylusv1alpha1.ReasonWaitingForAdmission)
	if !strings.Contains(c.Message, "LocalQueue lq") || !strings.Contains(c.Message, "insufficient") {
		t.Errorf("c waiting: %q; want the LocalQueue and Kueue's reason (insufficient quota)", c.Message)
	}
	waitScaled(t, ns, "c", 0, 0)

	// a finishes: its Workload is Finished, and c gets its quota.
	report(t, ns, "a", jobstatus.Progress{Epoch: 5})
	waitCondition(t, ns, "a", dorylusv1alpha1.ConditionSucceeded, metav1.ConditionTrue, "")
	eventually(t, "a's Workload finished", func() error {
		wl, err := getWorkload(t, ns, "a")
		if err != nil {
			return err
		}
		if f := meta.FindStatusCondition(workloadConditions(wl), workloadFinished); f == nil || f.Status != metav1.ConditionTrue || f.Reason != "Succeeded" {
			return fmt.Errorf("Finished condition %+v", f)
		}
		return nil
	})
	waitSuspended(t, ns, "c", metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted)
	waitScaled(t, ns, "c", 1, 1)

	// h (high) preempts c (low, below b's mid): c stops and gives its
	// quota back, requeued; h runs; b keeps running.
	createJob(t, userJob(ns, "h", queued("high")))
	c = waitSuspended(t, ns, "c", metav1.ConditionTrue, dorylusv1alpha1.ReasonEvicted)
	if !strings.Contains(c.Message, "Preempted") {
		t.Errorf("c evicted: %q; want Kueue's reason Preempted", c.Message)
	}
	waitScaled(t, ns, "c", 0, 0)
	waitSuspended(t, ns, "h", metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted)
	waitScaled(t, ns, "h", 1, 1)
	if wl, err := getWorkload(t, ns, "c"); err != nil {
		t.Error(err)
	} else if r := meta.FindStatusCondition(workloadConditions(wl), workloadRequeued); r == nil || r.Status != metav1.ConditionTrue || r.Reason != "Preempted" {
		t.Errorf("c's Workload Requeued %+v, want true, reason Preempted", r)
	}
	waitSuspended(t, ns, "b", metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted)
	waitScaled(t, ns, "b", 1, 1)

	// h finishes: c is admitted again and runs.
	report(t, ns, "h", jobstatus.Progress{Epoch: 5})
	waitSuspended(t, ns, "c", metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted)
	waitScaled(t, ns, "c", 1, 1)
}

// TestKueueUserSuspend suspends an admitted queued job: its Workload turns
// inactive, so Kueue takes its quota back, and the condition quotes the
// spec; resumed, it is admitted again. Its queue label removed, its Workload
// is deleted and it runs.
func TestKueueUserSuspend(t *testing.T) {
	startKueue(t)
	ns := newNamespace(t)
	flavor, cq := ns+"-cpu", ns+"-cq"
	kueueObject(t, "", fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: %s}}`, flavor))
	kueueObject(t, "", fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: ClusterQueue, metadata: {name: %s},
  spec: {namespaceSelector: {}, resourceGroups: [{coveredResources: [cpu], flavors: [{name: %s, resources: [{name: cpu, nominalQuota: 1}]}]}]}}`, cq, flavor))
	kueueObject(t, ns, fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq}, spec: {clusterQueue: %s}}`, cq))
	createJob(t, userJob(ns, "s", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Labels = map[string]string{LabelQueueName: "lq"}
		cpu := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
		j.Spec.GraphServers.Resources, j.Spec.ParameterServers.Resources = cpu, cpu
	}))
	waitSuspended(t, ns, "s", metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted)
	waitScaled(t, ns, "s", 1, 1)

	if err := updateJob(t, ns, "s", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) }); err != nil {
		t.Fatal(err)
	}
	waitSuspended(t, ns, "s", metav1.ConditionTrue, dorylusv1alpha1.ReasonSuspended)
	waitScaled(t, ns, "s", 0, 0)
	eventually(t, "the Workload inactive, its quota released", func() error {
		wl, err := getWorkload(t, ns, "s")
		if err != nil {
			return err
		}
		active, _, _ := unstructured.NestedBool(wl.Object, "spec", "active")
		_, admitted, _ := unstructured.NestedMap(wl.Object, "status", "admission")
		if active || admitted {
			return fmt.Errorf("spec.active %v, status.admission set %v", active, admitted)
		}
		return nil
	})

	if err := updateJob(t, ns, "s", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) }); err != nil {
		t.Fatal(err)
	}
	waitSuspended(t, ns, "s", metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted)
	waitScaled(t, ns, "s", 1, 1)

	// No longer queued: its Workload is deleted (its quota freed); it runs.
	if err := updateJob(t, ns, "s", func(j *dorylusv1alpha1.GNNTrainingJob) { delete(j.Labels, LabelQueueName) }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Workload deleted", func() error {
		if _, err := getWorkload(t, ns, "s"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("get Workload: %v", err)
		}
		return nil
	})
	waitScaled(t, ns, "s", 1, 1)
}
