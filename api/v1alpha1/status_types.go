package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GNNTrainingJobStatus is the observed state of a GNNTrainingJob. The
// operator writes everything except Progress, which graph server 0 writes
// (server-side apply, field manager "dorylus-graph-server") but for its
// estimate, and Partitions, which the partition step writes.
type GNNTrainingJobStatus struct {
	// ObservedGeneration is the metadata.generation the operator last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Created, Ready, Training and Suspended (always present)
	// and Succeeded or Failed (present once true). See the Condition* and
	// Reason* constants.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// StartTime is when the servers were last started: first set when the
	// job starts, reset when it resumes after a suspension. Its presence
	// marks training as started, which freezes most of the spec.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// GraphServers counts the graph servers wanted and ready.
	// +optional
	GraphServers ServerStatus `json:"graphServers,omitempty"`

	// ParameterServers counts the parameter-server shards wanted and ready.
	// +optional
	ParameterServers ServerStatus `json:"parameterServers,omitempty"`

	// Restarts counts the job's recoveries: each time a server failed and the
	// operator restarted every server from the last checkpoint. One failure
	// counts once, however many servers it took down; above
	// spec.runPolicy.backoffLimit the job fails.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`

	// LastRestartTime is when the operator last restarted the servers.
	// +optional
	LastRestartTime *metav1.Time `json:"lastRestartTime,omitempty"`

	// Outputs are the URIs of the files the job wrote to spec.output (s3://bucket/key, or
	// pvc://claim/path), set once every one is written.
	// +optional
	Outputs []string `json:"outputs,omitempty"`

	// Progress is reported by graph server 0; its estimate is the operator's.
	// +optional
	Progress *Progress `json:"progress,omitempty"`

	// Partitions describes the partition files of spec.dataset.partitionTo,
	// reported by the partition step (field manager "dorylus-partitioner")
	// once they are written or found there.
	// +optional
	Partitions *PartitionsStatus `json:"partitions,omitempty"`
}

// PartitionsStatus is the cut of a job's partition files.
type PartitionsStatus struct {
	// Parts is the number of partition files, one per graph server.
	Parts int32 `json:"parts"`
	// Method is the partitioner that cut them, e.g. multilevel.
	// +kubebuilder:validation:MaxLength=32
	Method string `json:"method"`
	// EdgeCut is the fraction of adjacency entries whose endpoints lie in
	// different partitions.
	EdgeCut Decimal `json:"edgeCut"`
	// Ghosts counts the ghost vertices over all partitions: the rows every
	// scatter ships.
	// +kubebuilder:validation:Minimum=0
	Ghosts int64 `json:"ghosts"`
	// Balance is the heaviest partition's weight (edges + vertices) over
	// the mean.
	Balance Decimal `json:"balance"`
	// Reused is set when the files were found at the location, written
	// earlier for the same dataset and count, rather than cut by this job.
	// +optional
	Reused bool `json:"reused,omitempty"`
}

// ServerStatus counts the replicas of one server role.
type ServerStatus struct {
	// Replicas is the number of servers wanted now (0 while suspended or
	// finished).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of servers ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// Progress is what the leading graph server reports after each epoch, and
// the operator's estimate of when the job ends.
type Progress struct {
	// Epoch is the last completed epoch (1-based; 0 before the first).
	// +kubebuilder:validation:Minimum=0
	Epoch int32 `json:"epoch"`
	// Loss is the training loss of that epoch.
	// +optional
	Loss *Decimal `json:"loss,omitempty"`
	// TrainAccuracy is the accuracy on the training mask, in [0, 1].
	// +optional
	TrainAccuracy *Decimal `json:"trainAccuracy,omitempty"`
	// ValAccuracy is the accuracy on the validation mask, in [0, 1].
	// +optional
	ValAccuracy *Decimal `json:"valAccuracy,omitempty"`
	// TestAccuracy is the accuracy on the test mask, in [0, 1].
	// +optional
	TestAccuracy *Decimal `json:"testAccuracy,omitempty"`
	// CostUSD is the estimated cost so far (servers and function calls).
	// +optional
	CostUSD *Decimal `json:"costUSD,omitempty"`
	// EpochCostUSD is the estimated cost of the last completed epoch.
	// +optional
	EpochCostUSD *Decimal `json:"epochCostUSD,omitempty"`
	// TensorCalls are the function calls (Lambda, Knative) of the run so far, every
	// launch of graph server 0 included: one per tensor task run remotely, retries and
	// relaunches beside stragglers included.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TensorCalls *int64 `json:"tensorCalls,omitempty"`
	// LocalTensorTasks are the tensor tasks placement by cost
	// (spec.tensorBackend.placement) ran in the graph servers instead of calling a
	// function, so far.
	// +kubebuilder:validation:Minimum=0
	// +optional
	LocalTensorTasks *int64 `json:"localTensorTasks,omitempty"`
	// GraphServerPeakMemory is the largest peak resident memory of any graph server so
	// far: what their memory request must cover.
	// +optional
	GraphServerPeakMemory *resource.Quantity `json:"graphServerPeakMemory,omitempty"`
	// LastCheckpointEpoch is the epoch of the newest saved checkpoint.
	// +kubebuilder:validation:Minimum=0
	// +optional
	LastCheckpointEpoch *int32 `json:"lastCheckpointEpoch,omitempty"`
	// FailureMessage, when set, is an unrecoverable training error (a NaN
	// loss, say, with where it appeared); the operator fails the job with
	// reason TrainingError.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	FailureMessage string `json:"failureMessage,omitempty"`
	// Outputs are the names of the files written to spec.output, the model card or the
	// prediction manifest last, reported once every one is written.
	// +kubebuilder:validation:MaxItems=4096
	// +optional
	Outputs []string `json:"outputs,omitempty"`
	// UpdateTime is when this progress was reported.
	// +optional
	UpdateTime *metav1.Time `json:"updateTime,omitempty"`
	// Estimate is the operator's forecast of when the job ends (field manager
	// "dorylus-operator"), refreshed while it trains; absent while it is
	// suspended, once it has finished, for an inference, and until graph
	// server 0 has reported an epoch of the current run.
	// +optional
	Estimate *CompletionEstimate `json:"estimate,omitempty"`
}

// CompletionEstimate forecasts a job's end from its epoch rate, measured
// between two reports of graph server 0 in the current run (since the job
// last started, resumed or restarted).
type CompletionEstimate struct {
	// SinceEpoch is the epoch of the first report of the current run the
	// operator saw: the rate is measured from there.
	// +kubebuilder:validation:Minimum=0
	SinceEpoch int32 `json:"sinceEpoch"`
	// SinceTime is that report's updateTime.
	SinceTime metav1.Time `json:"sinceTime"`
	// EpochSeconds is the mean time an epoch has taken since then; absent
	// until a later epoch is reported.
	// +optional
	EpochSeconds *Decimal `json:"epochSeconds,omitempty"`
	// CompletionTime is when the job is expected to end at that rate: after
	// its last epoch, or sooner at spec.runPolicy.activeDeadlineSeconds or at
	// the epoch whose cost (at the last epoch's) reaches
	// spec.runPolicy.budgetUSD. A report later than the rate expects moves
	// it: the epoch under way ends no sooner than now. When the validation
	// accuracy reaches spec.training.targetAccuracy cannot be known, so the
	// target is not forecast; it can only end the job sooner.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Reason is the reason of the condition the job is expected to end with
	// at completionTime: EpochsCompleted (Succeeded), DeadlineExceeded or
	// BudgetExceeded (Failed).
	// +kubebuilder:validation:Enum=EpochsCompleted;DeadlineExceeded;BudgetExceeded
	// +optional
	Reason string `json:"reason,omitempty"`
}
