package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ControllerName is the value of spec.managedBy (or its absence) that makes
// this operator reconcile a job.
const ControllerName = "dorylus.dev/operator"

// MaxJobNameLength bounds metadata.name so that every derived child name stays
// within the 63-character DNS label limit: the longest is the Knative
// revision's private Service, <name>-fn-00001-private.
const MaxJobNameLength = 40

// Decimal is a non-negative decimal number written as a string ("0.01",
// "5e-4", "12.50"), so that the API carries no floating-point fields.
// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
// +kubebuilder:validation:MaxLength=32
type Decimal string

// GNNTrainingJob is one distributed Dorylus training run: a StatefulSet of
// graph servers (one per partition), parameter-server shards, and a tensor
// backend (local CPU, AWS Lambda or Knative) that runs the dense tasks.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gnnjob;gnnjobs,categories=dorylus
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.progress.epoch`
// +kubebuilder:printcolumn:name="Val-Acc",type=string,JSONPath=`.status.progress.valAccuracy`
// +kubebuilder:printcolumn:name="Cost-USD",type=string,JSONPath=`.status.progress.costUSD`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Succeeded",type=string,JSONPath=`.status.conditions[?(@.type=="Succeeded")].status`
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.progress.estimate.completionTime`
// +kubebuilder:printcolumn:name="Failed",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Failed")].status`
// +kubebuilder:printcolumn:name="Suspended",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Suspended")].status`
// +kubebuilder:printcolumn:name="ETA-Reason",type=string,priority=1,JSONPath=`.status.progress.estimate.reason`
// +kubebuilder:printcolumn:name="Restarts",type=integer,priority=1,JSONPath=`.status.restarts`
// +kubebuilder:printcolumn:name="Edge-Cut",type=string,priority=1,JSONPath=`.status.partitions.edgeCut`
// +kubebuilder:printcolumn:name="Ghosts",type=integer,priority=1,JSONPath=`.status.partitions.ghosts`
// +kubebuilder:printcolumn:name="GS-Peak-Mem",type=string,priority=1,JSONPath=`.status.progress.graphServerPeakMemory`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40",message="metadata.name must be at most 40 characters so that derived child names (<name>-gs-<ordinal>, <name>-fn-00001-private) fit in 63"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (start with a letter; lowercase letters, digits and '-') because it names Services"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec.dataset == oldSelf.spec.dataset",message="spec.dataset is immutable once training has started"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec.model == oldSelf.spec.model",message="spec.model is immutable once training has started"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec.training == oldSelf.spec.training",message="spec.training is immutable once training has started"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec.tensorBackend == oldSelf.spec.tensorBackend",message="spec.tensorBackend is immutable once training has started"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.startTime) || (has(self.spec.checkpoint) == has(oldSelf.spec.checkpoint) && (!has(self.spec.checkpoint) || self.spec.checkpoint == oldSelf.spec.checkpoint))",message="spec.checkpoint is immutable once training has started"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec.graphServers.replicas == oldSelf.spec.graphServers.replicas",message="spec.graphServers.replicas (the partition count) is immutable once training has started"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec.parameterServers.replicas == oldSelf.spec.parameterServers.replicas",message="spec.parameterServers.replicas (the shard count) is immutable once training has started"
type GNNTrainingJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired training run.
	Spec GNNTrainingJobSpec `json:"spec"`
	// Status is the observed state, written by the operator (conditions,
	// replicas, times, the completion estimate) and by graph server 0
	// (progress).
	// +optional
	Status GNNTrainingJobStatus `json:"status,omitempty"`
}

// GNNTrainingJobList is a list of GNNTrainingJobs.
//
// +kubebuilder:object:root=true
type GNNTrainingJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the jobs.
	Items []GNNTrainingJob `json:"items"`
}

// GNNTrainingJobSpec is the desired state of a GNNTrainingJob.
//
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="spec.managedBy is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.inference) || has(self.output)",message="spec.inference needs spec.output: where to write the predictions",fieldPath=".inference"
// +kubebuilder:validation:XValidation:rule="!has(self.tensorBackend) || !has(self.tensorBackend.lambda) || !has(self.tensorBackend.lambda.credentials.roleARN) || !has(self.graphServers) || !has(self.graphServers.podTemplate) || !has(self.graphServers.podTemplate.spec) || !has(self.graphServers.podTemplate.spec.serviceAccountName)",message="spec.tensorBackend.lambda.credentials.roleARN annotates the job's own ServiceAccount, which graph servers with their own serviceAccountName do not use: use credentials.secretRef, or leave the ServiceAccount to the operator",fieldPath=".graphServers.podTemplate.spec.serviceAccountName"
type GNNTrainingJobSpec struct {
	// ManagedBy names the controller that reconciles this job. Unset or
	// "dorylus.dev/operator" means this operator; any other value makes the
	// operator leave the job alone, so that another controller (a multi-cluster
	// dispatcher, say) can own it. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9._]*[a-zA-Z0-9])?$`
	ManagedBy *string `json:"managedBy,omitempty"`

	// Image overrides the operator's default runtime image (the one holding
	// the dorylus command) for every pod of the job.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	Image string `json:"image,omitempty"`

	// Dataset is where the graph comes from: exactly one source.
	Dataset DatasetSource `json:"dataset"`

	// Model is the GNN architecture.
	// +kubebuilder:default={}
	// +optional
	Model ModelSpec `json:"model,omitempty"`

	// Training holds the optimisation and pipeline settings.
	// +kubebuilder:default={}
	// +optional
	Training TrainingSpec `json:"training,omitempty"`

	// GraphServers are the CPU servers that hold one edge-cut partition each
	// and run the graph-parallel tasks.
	// +kubebuilder:default={}
	// +optional
	GraphServers GraphServerSpec `json:"graphServers,omitempty"`

	// ParameterServers hold the weights and apply the updates, one weight
	// shard per replica.
	// +kubebuilder:default={}
	// +optional
	ParameterServers ParameterServerSpec `json:"parameterServers,omitempty"`

	// TensorBackend runs the tensor-parallel tasks: exactly one backend.
	// +kubebuilder:default={cpu:{}}
	// +optional
	TensorBackend *TensorBackendSpec `json:"tensorBackend,omitempty"`

	// Checkpoint saves weights every few epochs so that a restarted or
	// resumed job continues where it stopped, in every training mode: with a
	// staleness bound the pipeline drains to a common epoch every
	// intervalEpochs epochs and the checkpoint is taken there. Unset: no
	// checkpoints.
	// +optional
	Checkpoint *CheckpointSpec `json:"checkpoint,omitempty"`

	// Output is where the job writes, at the end, the trained model (weights as safetensors
	// and a model card), every vertex's prediction, class probabilities and embedding (.npy,
	// one set of files per graph server with their vertex ids), the history and the curves;
	// status.outputs lists them. Unset: nothing is written.
	// +optional
	Output *OutputSpec `json:"output,omitempty"`

	// Inference, when set, runs the saved model it names instead of training; it needs
	// spec.output.
	// +optional
	Inference *InferenceSpec `json:"inference,omitempty"`

	// RunPolicy is the job's life-cycle policy: suspension, restarts,
	// deadline, budget and clean-up.
	// +kubebuilder:default={}
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`
}

// ModelSpec is the GNN architecture.
//
// +kubebuilder:validation:XValidation:rule="self.architecture == 'GAT' || !has(self.heads)",message="spec.model.heads applies only to architecture GAT"
type ModelSpec struct {
	// Architecture is the GNN: GCN (Kipf & Welling), GAT (graph attention) or GraphSAGE
	// (Hamilton et al., mean aggregator).
	// +kubebuilder:validation:Enum=GCN;GAT;GraphSAGE
	// +kubebuilder:default=GCN
	// +optional
	Architecture Architecture `json:"architecture,omitempty"`

	// Layers is the number of GNN layers.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +kubebuilder:default=2
	// +optional
	Layers int32 `json:"layers,omitempty"`

	// Hidden is the width of every hidden layer.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:default=16
	// +optional
	Hidden int32 `json:"hidden,omitempty"`

	// Dropout is the dropout rate on layer inputs, in [0, 1).
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?$') || double(self) < 1.0",message="spec.model.dropout must be in [0, 1)"
	// +kubebuilder:default="0.5"
	// +optional
	Dropout Decimal `json:"dropout,omitempty"`

	// Heads is the number of attention heads of a GAT (8 when unset).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Heads *int32 `json:"heads,omitempty"`
}

// Architecture names a GNN architecture.
type Architecture string

const (
	// ArchitectureGCN is the graph convolutional network.
	ArchitectureGCN Architecture = "GCN"
	// ArchitectureGAT is the graph attention network.
	ArchitectureGAT Architecture = "GAT"
	// ArchitectureSAGE is GraphSAGE with the mean aggregator.
	ArchitectureSAGE Architecture = "GraphSAGE"
)

// TrainingSpec holds the optimisation and pipeline settings.
// +kubebuilder:validation:XValidation:rule="!has(self.updateEvery) || !has(self.staleness) || type(self.staleness) != string || self.staleness != 'sync'",message="updateEvery needs an asynchronous staleness (an integer): synchronous training makes one update per epoch of every interval's gradients",fieldPath=".updateEvery",reason=FieldValueInvalid
type TrainingSpec struct {
	// Epochs is the number of training epochs; the job succeeds once graph
	// server 0 reports this epoch.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +kubebuilder:default=200
	// +optional
	Epochs int32 `json:"epochs,omitempty"`

	// LearningRate is Adam's step size, greater than 0.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?$') || double(self) > 0.0",message="spec.training.learningRate must be greater than 0"
	// +kubebuilder:default="0.01"
	// +optional
	LearningRate Decimal `json:"learningRate,omitempty"`

	// WeightDecay is the L2 penalty on the weights.
	// +kubebuilder:default="0.0005"
	// +optional
	WeightDecay Decimal `json:"weightDecay,omitempty"`

	// TargetAccuracy, in (0, 1], ends the job early (Succeeded) once the
	// validation accuracy reaches it.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?$') || (double(self) > 0.0 && double(self) <= 1.0)",message="spec.training.targetAccuracy must be in (0, 1]"
	// +optional
	TargetAccuracy *Decimal `json:"targetAccuracy,omitempty"`

	// Staleness is the pipeline's asynchrony: "sync" (a barrier after every
	// Scatter, plain full-graph training; the default, as for dorylus train:
	// exact) or the bound S in [0, 16]
	// (an interval may run at most S epochs ahead of the slowest).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? self == 'sync' : (self >= 0 && self <= 16)",message="spec.training.staleness must be \"sync\" or an integer in [0, 16]"
	// +kubebuilder:default="sync"
	// +optional
	Staleness intstr.IntOrString `json:"staleness,omitempty"`

	// Intervals is the number of vertex intervals per graph server; unset
	// means as many as the tensor backend runs concurrently.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	Intervals *int32 `json:"intervals,omitempty"`

	// UpdateEvery is the asynchronous pipeline's update granularity: how many
	// of a graph server's intervals sum their weight gradients of an epoch
	// into one update to the parameter servers: "epoch" (all of them, one
	// update per graph server per epoch; the default, as for dorylus train),
	// "interval" (each its own, as the original Dorylus) or a number of
	// intervals in [1, 65536]. Only with an integer staleness.
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="self in ['epoch', 'interval'] || (self.matches('^[1-9][0-9]{0,4}$') && int(self) <= 65536)",message="spec.training.updateEvery must be \"epoch\", \"interval\" or a number of intervals in [1, 65536]"
	// +optional
	UpdateEvery string `json:"updateEvery,omitempty"`

	// Seed seeds weight initialisation and dropout.
	// +kubebuilder:default=1
	// +optional
	Seed int64 `json:"seed,omitempty"`
}

// ServerPodSpec is the scheduling part shared by graph and parameter servers.
type ServerPodSpec struct {
	// Resources are the server container's requests and limits: each request at
	// most its limit, none negative, no resource claims.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !(r in self.limits) || !isQuantity(string(self.requests[r])) || !isQuantity(string(self.limits[r])) || !quantity(string(self.limits[r])).isLessThan(quantity(string(self.requests[r]))))",message="requests of cpu, memory and ephemeral-storage must each be at most its limit",fieldPath=".requests",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !isQuantity(string(self.requests[r])) || !quantity(string(self.requests[r])).isLessThan(quantity('0')))",message="resource requests must not be negative",fieldPath=".requests",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.limits) || !isQuantity(string(self.limits[r])) || !quantity(string(self.limits[r])).isLessThan(quantity('0')))",message="resource limits must not be negative",fieldPath=".limits",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(r, r in ['cpu', 'memory', 'ephemeral-storage'] || r.startsWith('hugepages-') || r.contains('/'))",message="resource requests must name cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified extended resource",fieldPath=".requests",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="resource claims are not supported: the job's pods declare no resource claims for them to use",fieldPath=".claims",reason=FieldValueInvalid
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// NodeSelector constrains the servers' pods to matching nodes: label keys
	// to label values.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="node selector keys must be label keys: an optional DNS-subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.'",reason=FieldValueInvalid
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the servers' pods run on tainted nodes.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['', 'Exists', 'Equal', 'Lt', 'Gt'])",message="a toleration's operator must be Exists, Equal, Lt or Gt",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="a toleration's effect must be NoSchedule, PreferNoSchedule, NoExecute or empty (every effect)",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(t, has(t.key) && t.key != '' || has(t.operator) && t.operator == 'Exists')",message="a toleration without a key must have operator Exists (it then tolerates every taint)",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')",message="a toleration with operator Exists must have no value",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.tolerationSeconds) || has(t.effect) && t.effect == 'NoExecute')",message="tolerationSeconds applies only to effect NoExecute",reason=FieldValueInvalid
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// PodTemplate adds labels, annotations and pod settings to the servers'
	// pods.
	// +optional
	PodTemplate *PodTemplate `json:"podTemplate,omitempty"`
}

// GraphServerSpec describes the graph servers: one pod per partition, in a
// StatefulSet whose ordinal is the partition id.
type GraphServerSpec struct {
	// Replicas is the number of graph servers, which is also the number of
	// partitions of the graph.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +kubebuilder:default=1
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	ServerPodSpec `json:",inline"`
}

// ParameterServerSpec describes the parameter servers: one pod per weight
// shard.
type ParameterServerSpec struct {
	// Replicas is the number of parameter-server shards.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +kubebuilder:default=1
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	ServerPodSpec `json:",inline"`
}

// RunPolicy is the job's life-cycle policy.
type RunPolicy struct {
	// Suspend scales every server to zero while keeping the job and its
	// progress; setting it back to false resumes from the last checkpoint
	// (spec.checkpoint; with a staleness bound, the last epoch where the
	// pipeline drained), or from epoch 1 without checkpoints.
	// +kubebuilder:default=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// BackoffLimit is how many times a job with checkpoints may restart its
	// servers from the last checkpoint after a server failed (a failure
	// restarts every server and counts once) before it fails with reason
	// BackoffLimitExceeded. A job without checkpoints fails at its first
	// server failure (reason ServerFailed): it has nothing to resume from.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=3
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// ActiveDeadlineSeconds bounds the time from status.startTime (reset on
	// resume) to completion; past it the job fails with reason
	// DeadlineExceeded. At most 366 days.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31622400
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the job (and, through owner
	// references, its children) this long after it succeeded or failed; at
	// most 366 days.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31622400
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// BudgetUSD stops the job (Failed, reason BudgetExceeded) once the cost
	// reported in status.progress.costUSD reaches it.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?$') || double(self) > 0.0",message="spec.runPolicy.budgetUSD must be greater than 0"
	// +optional
	BudgetUSD *Decimal `json:"budgetUSD,omitempty"`
}

// Backend returns the tensor backend: spec.tensorBackend, or the CPU backend
// the API server defaults it to when it is unset.
func (s *GNNTrainingJobSpec) Backend() TensorBackendSpec {
	if s.TensorBackend == nil {
		return TensorBackendSpec{CPU: &CPUBackend{}}
	}
	return *s.TensorBackend
}

func init() {
	SchemeBuilder.Register(&GNNTrainingJob{}, &GNNTrainingJobList{})
}
