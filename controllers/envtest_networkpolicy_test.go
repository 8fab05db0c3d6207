package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TestNetworkPolicy reads each job's NetworkPolicies back from the API server:
// its servers admit the job's own servers on the data ports and the scraper
// namespaces on the metrics port; a Lambda function pulling tensors reaches the
// data ports from outside the cluster; the pods of a function serving the job
// (labelled dorylus.dev/function-of) admit its graph servers alone.
func TestNetworkPolicy(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "cora"))
	createJob(t, userJob(ns, "pull", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Lambda: &dorylusv1alpha1.LambdaBackend{
			FunctionName: "f", Region: "us-east-1", DataPath: dorylusv1alpha1.DataPathPull,
			Credentials: dorylusv1alpha1.AWSCredentials{SecretRef: &dorylusv1alpha1.SecretReference{Name: "aws"}}}}
	}))
	tcp := ptr.To(corev1.ProtocolTCP)
	port := func(p int) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: tcp, Port: ptr.To(intstr.FromInt(p))}
	}
	servers := func(job string) metav1.LabelSelector {
		return metav1.LabelSelector{
			MatchLabels:      map[string]string{"dorylus.dev/job-name": job},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "dorylus.dev/role", Operator: metav1.LabelSelectorOpIn, Values: []string{"graph-server", "param-server"}}},
		}
	}
	want := func(job string, dataFrom []networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicySpec {
		return networkingv1.NetworkPolicySpec{
			PodSelector: servers(job),
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: []networkingv1.NetworkPolicyPort{port(5000), port(5100)}, From: dataFrom},
				{Ports: []networkingv1.NetworkPolicyPort{port(9090)}, From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}},
			},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}
	}
	coraServers := servers("cora")
	ownServers := []networkingv1.NetworkPolicyPeer{{PodSelector: &coraServers}}
	for job, spec := range map[string]networkingv1.NetworkPolicySpec{"cora": want("cora", ownServers), "pull": want("pull", nil)} {
		got := waitCondition(t, ns, job, dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
		var np networkingv1.NetworkPolicy
		if err := getObj(t, ns, job+"-servers", &np); err != nil {
			t.Fatalf("NetworkPolicy of %s: %v", job, err)
		}
		if diff := cmp.Diff(spec, np.Spec); diff != "" {
			t.Errorf("%s NetworkPolicy spec (-want +got):\n%s", job, diff)
		}
		owner := []metav1.OwnerReference{{APIVersion: "dorylus.dev/v1alpha1", Kind: "GNNTrainingJob", Name: job,
			UID: got.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		if diff := cmp.Diff(owner, np.OwnerReferences); diff != "" {
			t.Errorf("%s NetworkPolicy owner (-want +got):\n%s", job, diff)
		}
		if np.Labels[LabelJobName] != job || np.Labels[ManagedByLabel] != "dorylus-operator" {
			t.Errorf("%s NetworkPolicy labels %v", job, np.Labels)
		}
		var fp networkingv1.NetworkPolicy
		if err := getObj(t, ns, job+"-function", &fp); err != nil {
			t.Fatalf("function NetworkPolicy of %s: %v", job, err)
		}
		wantFn := networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"dorylus.dev/function-of": job}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dorylus.dev/job-name": job, "dorylus.dev/role": "graph-server"}}}}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}
		if diff := cmp.Diff(wantFn, fp.Spec); diff != "" {
			t.Errorf("%s function NetworkPolicy spec (-want +got):\n%s", job, diff)
		}
		if diff := cmp.Diff(owner, fp.OwnerReferences); diff != "" {
			t.Errorf("%s function NetworkPolicy owner (-want +got):\n%s", job, diff)
		}
	}

	// The policy selects the job's server pods, and its data rule admits them
	// (graph servers call parameter servers and each other), but no other job's,
	// none of the job's other pods (its partitioner, its managed Knative
	// function) and no pod without labels.
	var np networkingv1.NetworkPolicy
	var sts appsv1.StatefulSet
	var dep appsv1.Deployment
	if err := getObj(t, ns, "cora-servers", &np); err != nil {
		t.Fatal(err)
	}
	if err := getObj(t, ns, "cora-gs", &sts); err != nil {
		t.Fatal(err)
	}
	if err := getObj(t, ns, "cora-ps-0", &dep); err != nil {
		t.Fatal(err)
	}
	pods, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	peers, _ := metav1.LabelSelectorAsSelector(np.Spec.Ingress[0].From[0].PodSelector)
	for role, l := range map[string]map[string]string{"graph server": sts.Spec.Template.Labels, "parameter server": dep.Spec.Template.Labels} {
		if !pods.Matches(labels.Set(l)) || !peers.Matches(labels.Set(l)) {
			t.Errorf("the %s pods %v are not selected (%s) or not admitted (%s)", role, l, pods, peers)
		}
	}
	other := labels.Set{LabelJobName: "pull", LabelRole: RoleGraphServer}
	if pods.Matches(other) || peers.Matches(other) {
		t.Errorf("cora's policy selects or admits another job's pods %v", other)
	}
	job := userJob(ns, "cora")
	for name, l := range map[string]labels.Set{"partitioner": childLabels(job, RolePartitioner), "managed function": childLabels(job, RoleFunction), "unlabelled": {}} {
		if pods.Matches(l) || peers.Matches(l) {
			t.Errorf("cora's policy selects or admits its %s pods %v", name, l)
		}
	}

	// The function policy selects the pods of cora's function, not another
	// job's, and admits cora's graph servers only: not its parameter servers,
	// not another job's graph servers, not a pod without labels.
	var fp networkingv1.NetworkPolicy
	if err := getObj(t, ns, "cora-function", &fp); err != nil {
		t.Fatal(err)
	}
	fnPods, _ := metav1.LabelSelectorAsSelector(&fp.Spec.PodSelector)
	callers, _ := metav1.LabelSelectorAsSelector(fp.Spec.Ingress[0].From[0].PodSelector)
	if !fnPods.Matches(labels.Set{LabelFunctionOf: "cora", "app": "fn"}) || fnPods.Matches(labels.Set{LabelFunctionOf: "pull"}) || fnPods.Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("the function policy selects %s", fnPods)
	}
	if !callers.Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("the function policy does not admit the graph servers %v (%s)", sts.Spec.Template.Labels, callers)
	}
	for name, l := range map[string]labels.Set{"parameter servers": dep.Spec.Template.Labels, "another job's graph servers": other, "a pod without labels": {}} {
		if callers.Matches(l) {
			t.Errorf("the function policy admits %s %v", name, l)
		}
	}
}
