package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// TensorBackendSpec selects where tensor-parallel tasks run: exactly one of
// cpu, lambda or knative.
//
// +kubebuilder:validation:XValidation:rule="[has(self.cpu), has(self.lambda), has(self.knative)].filter(x, x).size() == 1",message="spec.tensorBackend must set exactly one of cpu, lambda, knative"
// +kubebuilder:validation:XValidation:rule="!has(self.cpu) || !has(self.placement) || self.placement == 'Auto'",message="spec.tensorBackend.placement Remote is for lambda and knative: the cpu backend runs every tensor task in the graph servers",fieldPath=".placement",reason=FieldValueForbidden
type TensorBackendSpec struct {
	// CPU runs tensor tasks on a goroutine pool inside each graph server.
	// +optional
	CPU *CPUBackend `json:"cpu,omitempty"`
	// Lambda invokes an AWS Lambda function running `dorylus function`.
	// +optional
	Lambda *LambdaBackend `json:"lambda,omitempty"`
	// Knative posts tensor tasks to a Knative Service.
	// +optional
	Knative *KnativeBackend `json:"knative,omitempty"`
	// Placement is where a function backend's tensor tasks run: Auto runs a
	// kind of task whose call costs more than computing it (by the planner's
	// calibrated model: the call's overhead and transfer against the task's
	// compute) in the graph servers, the rest on the functions; Remote calls
	// the functions for every task.
	// +kubebuilder:validation:Enum=Auto;Remote
	// +kubebuilder:default=Auto
	// +optional
	Placement Placement `json:"placement,omitempty"`
}

// Placement is where a function backend's tensor tasks run.
type Placement string

const (
	// PlacementAuto places each kind of task by cost.
	PlacementAuto Placement = "Auto"
	// PlacementRemote sends every task to the functions.
	PlacementRemote Placement = "Remote"
)

// CPUBackend runs tensor tasks on a goroutine pool inside each graph server.
type CPUBackend struct {
	// Workers is the pool size; unset means GOMAXPROCS of the graph server.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +optional
	Workers *int32 `json:"workers,omitempty"`
}

// LambdaBackend invokes an AWS Lambda function. Credentials never appear in
// the spec: they come from the pods' service account identity (IRSA) or a
// Secret.
type LambdaBackend struct {
	// FunctionName is the function's name or ARN.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=170
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9:_/.$-]+$`
	FunctionName string `json:"functionName"`
	// Region is the function's AWS region.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	Region string `json:"region"`
	// MemoryMB is the function's configured memory, used by the cost model.
	// +kubebuilder:validation:Minimum=128
	// +kubebuilder:validation:Maximum=10240
	// +kubebuilder:default=3008
	// +optional
	MemoryMB int32 `json:"memoryMB,omitempty"`
	// MaxConcurrency caps concurrent invocations per graph server.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=100
	// +optional
	MaxConcurrency int32 `json:"maxConcurrency,omitempty"`
	// DataPath is how tensors reach the function: Inline (tensors in the
	// request, under Lambda's 6 MB limit) or Pull (a small descriptor; the
	// function fetches rows and weights over gRPC from the servers' pod IPs,
	// so it must run in the cluster's VPC with routable pod IPs).
	// +kubebuilder:validation:Enum=Pull;Inline
	// +kubebuilder:default=Inline
	// +optional
	DataPath DataPath `json:"dataPath,omitempty"`
	// Endpoint overrides the Lambda endpoint (a VPC endpoint or an emulator).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// Credentials say how the graph servers authenticate to Lambda.
	Credentials AWSCredentials `json:"credentials"`
}

// DataPath is how tensors reach a function.
type DataPath string

const (
	// DataPathPull sends a descriptor; the worker pulls tensors over gRPC.
	DataPathPull DataPath = "Pull"
	// DataPathInline sends the tensors in the request body.
	DataPathInline DataPath = "Inline"
)

// AWSCredentials select exactly one way to authenticate: the role of the
// job's ServiceAccount (IRSA) or a Secret.
//
// +kubebuilder:validation:XValidation:rule="[has(self.roleARN), has(self.secretRef)].filter(x, x).size() == 1",message="spec.tensorBackend.lambda.credentials must set exactly one of roleARN, secretRef"
type AWSCredentials struct {
	// RoleARN is an IAM role the job's ServiceAccount assumes (set as its
	// eks.amazonaws.com/role-arn annotation).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$`
	// +optional
	RoleARN string `json:"roleARN,omitempty"`
	// SecretRef names a Secret in the job's namespace with keys accessKeyID,
	// secretAccessKey and optionally sessionToken.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
}

// KnativeBackend posts tensor tasks over HTTP to a Knative Service: an
// existing one (url) or one the operator manages (service). Every call carries
// the job's bearer token: the operator makes the managed function's; an
// existing function's comes from tokenSecretRef.
//
// +kubebuilder:validation:XValidation:rule="[has(self.url), has(self.service)].filter(x, x).size() == 1",message="spec.tensorBackend.knative must set exactly one of url, service"
// +kubebuilder:validation:XValidation:rule="!has(self.url) || has(self.tokenSecretRef)",message="spec.tensorBackend.knative.tokenSecretRef is required with url: the Secret holding the function's bearer token",fieldPath=".tokenSecretRef",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.service) || !has(self.tokenSecretRef)",message="spec.tensorBackend.knative.tokenSecretRef is for url only: the operator makes the managed function's token",fieldPath=".tokenSecretRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.tokenSecretRef) || size(self.tokenSecretRef.name) > 0",message="spec.tensorBackend.knative.tokenSecretRef.name must not be empty",fieldPath=".tokenSecretRef.name",reason=FieldValueRequired
type KnativeBackend struct {
	// URL is the address of an existing Knative Service.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +optional
	URL string `json:"url,omitempty"`
	// Service makes the operator create a serving.knative.dev/v1 Service named
	// <job>-fn running `dorylus function`.
	// +optional
	Service *KnativeServiceTemplate `json:"service,omitempty"`
	// TokenSecretRef names the Secret (key "token") holding the bearer token
	// the function at url requires (its `dorylus function --token-file`); it
	// is mounted into the graph servers only. Required with url.
	// +optional
	TokenSecretRef *corev1.LocalObjectReference `json:"tokenSecretRef,omitempty"`
	// MaxConcurrency caps concurrent requests per graph server.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=100
	// +optional
	MaxConcurrency int32 `json:"maxConcurrency,omitempty"`
}

// KnativeServiceTemplate is the part of a managed Knative Service a user sets.
//
// +kubebuilder:validation:XValidation:rule="self.minScale <= self.maxScale",message="spec.tensorBackend.knative.service.minScale must not exceed maxScale"
type KnativeServiceTemplate struct {
	// Image overrides the job's runtime image for the function.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	// +optional
	Image string `json:"image,omitempty"`
	// Resources are the function container's requests and limits: each request
	// at most its limit, none negative, no resource claims.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !(r in self.limits) || !isQuantity(string(self.requests[r])) || !isQuantity(string(self.limits[r])) || !quantity(string(self.limits[r])).isLessThan(quantity(string(self.requests[r]))))",message="requests of cpu, memory and ephemeral-storage must each be at most its limit",fieldPath=".requests",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !isQuantity(string(self.requests[r])) || !quantity(string(self.requests[r])).isLessThan(quantity('0')))",message="resource requests must not be negative",fieldPath=".requests",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.limits) || !isQuantity(string(self.limits[r])) || !quantity(string(self.limits[r])).isLessThan(quantity('0')))",message="resource limits must not be negative",fieldPath=".limits",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(r, r in ['cpu', 'memory', 'ephemeral-storage'] || r.startsWith('hugepages-') || r.contains('/'))",message="resource requests must name cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified extended resource",fieldPath=".requests",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="resource claims are not supported: the job's pods declare no resource claims for them to use",fieldPath=".claims",reason=FieldValueInvalid
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// ContainerConcurrency is how many requests one function pod serves at
	// once (0: unlimited).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	ContainerConcurrency *int32 `json:"containerConcurrency,omitempty"`
	// MinScale is the autoscaler's lower bound on pods.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=0
	// +optional
	MinScale int32 `json:"minScale,omitempty"`
	// MaxScale is the autoscaler's upper bound on pods.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=100
	// +optional
	MaxScale int32 `json:"maxScale,omitempty"`
	// PodTemplate adds labels, annotations and pod settings to the
	// function's revision template.
	// +optional
	PodTemplate *PodTemplate `json:"podTemplate,omitempty"`
}
