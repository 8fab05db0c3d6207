package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// serverDataPorts are the ports on which a job's servers serve each other
// and its tensor workers; a new data-plane port joins this list.
var serverDataPorts = []int32{jobconfig.GraphServerPort, jobconfig.ParamServerPort}

// networkPolicyName is the job's NetworkPolicy.
func networkPolicyName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Name + "-servers" }

// buildNetworkPolicy admits ingress to the job's graph and parameter servers
// only on serverDataPorts from the job's own graph and parameter servers
// (graph servers call each other and the parameter servers; no other pod of
// the job, its partitioner or its managed Knative function, calls them), and
// on the metrics port only from the namespaces scrapers selects. A Lambda
// function pulling tensors (dataPath Pull) calls the servers from outside
// the cluster, so for such a job the data ports admit any source and only
// mutual TLS tells the job's callers apart. Egress stays open: datasets,
// checkpoints and functions may live anywhere (S3, HTTP, Lambda).
//
// The kubelet's readiness probes come from the node, which common CNIs
// (Calico, Cilium, the AWS VPC CNI) do not subject to policy, so no rule
// admits them. The functions' pods have a policy of their own
// (buildFunctionNetworkPolicy).
func buildNetworkPolicy(job *dorylusv1alpha1.GNNTrainingJob, scrapers metav1.LabelSelector) *networkingv1ac.NetworkPolicyApplyConfiguration {
	data := networkingv1ac.NetworkPolicyIngressRule().WithPorts(policyPorts(serverDataPorts...)...)
	if !lambdaPull(job) {
		data.WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(serversSelector(job)))
	}
	return networkingv1ac.NetworkPolicy(networkPolicyName(job), job.Namespace).
		WithLabels(childLabels(job, RoleRuntime)).
		WithOwnerReferences(ownerReference(job)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(serversSelector(job)).
			WithPolicyTypes("Ingress").
			WithIngress(data,
				networkingv1ac.NetworkPolicyIngressRule().
					WithPorts(policyPorts(jobconfig.MetricsPort)...).
					WithFrom(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(labelSelector(scrapers)))))
}

// serversSelector selects the job's graph and parameter servers.
func serversSelector(job *dorylusv1alpha1.GNNTrainingJob) *metav1ac.LabelSelectorApplyConfiguration {
	return metav1ac.LabelSelector().
		WithMatchLabels(map[string]string{LabelJobName: job.Name}).
		WithMatchExpressions(metav1ac.LabelSelectorRequirement().
			WithKey(LabelRole).WithOperator(metav1.LabelSelectorOpIn).WithValues(RoleGraphServer, RoleParamServer))
}

// LabelFunctionOf on the pods of an HTTP function that serves one job (a
// Deployment at spec.tensorBackend.knative.url) names that job: its
// NetworkPolicy <job>-function selects them.
const LabelFunctionOf = "dorylus.dev/function-of"

// functionPolicyName is the NetworkPolicy of the job's function pods.
func functionPolicyName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Name + "-function" }

// buildFunctionNetworkPolicy admits ingress to the pods labelled
// LabelFunctionOf the job's name, on any port, only from the job's graph
// servers: the only callers of a function at a URL. A function Deployment
// that serves the job carries that label; with none the policy selects
// nothing. A managed Knative function's pods do not carry it: Knative
// delivers their requests through its activator and ingress gateway to the
// queue-proxy port, so the job's pods are never the source those pods see.
func buildFunctionNetworkPolicy(job *dorylusv1alpha1.GNNTrainingJob) *networkingv1ac.NetworkPolicyApplyConfiguration {
	return networkingv1ac.NetworkPolicy(functionPolicyName(job), job.Namespace).
		WithLabels(childLabels(job, RoleRuntime)).
		WithOwnerReferences(ownerReference(job)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{LabelFunctionOf: job.Name})).
			WithPolicyTypes("Ingress").
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().
				WithFrom(networkingv1ac.NetworkPolicyPeer().
					WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(job, RoleGraphServer))))))
}

// policyPorts are TCP ports of a NetworkPolicy rule.
func policyPorts(ports ...int32) []*networkingv1ac.NetworkPolicyPortApplyConfiguration {
	out := make([]*networkingv1ac.NetworkPolicyPortApplyConfiguration, 0, len(ports))
	for _, p := range ports {
		out = append(out, networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(p)))
	}
	return out
}

// labelSelector converts a typed selector into its apply configuration.
func labelSelector(s metav1.LabelSelector) *metav1ac.LabelSelectorApplyConfiguration {
	return applyConfigOf[*metav1ac.LabelSelectorApplyConfiguration](&s)
}
