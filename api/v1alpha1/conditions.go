package v1alpha1

// Condition types of a GNNTrainingJob. Created, Ready, Training and Suspended
// are always present once the operator has seen the job; Succeeded and Failed
// appear when they become true, and then the job is finished.
const (
	// ConditionCreated is true once every child object exists as specified.
	ConditionCreated = "Created"
	// ConditionReady is true while every graph and parameter server is ready.
	ConditionReady = "Ready"
	// ConditionTraining is true while the servers are ready and the job is
	// neither suspended nor finished.
	ConditionTraining = "Training"
	// ConditionSucceeded is true once training completed.
	ConditionSucceeded = "Succeeded"
	// ConditionFailed is true once the job stopped for good on an error or
	// a policy limit.
	ConditionFailed = "Failed"
	// ConditionSuspended mirrors spec.runPolicy.suspend, or for a job queued
	// in Kueue whether its Workload is admitted, once the servers have been
	// scaled accordingly.
	ConditionSuspended = "Suspended"
)

// Reasons of the Created condition.
const (
	// ReasonChildrenCreated: every child object was applied.
	ReasonChildrenCreated = "ChildrenCreated"
	// ReasonChildApplyFailed: the API server refused a child object.
	ReasonChildApplyFailed = "ChildApplyFailed"
	// ReasonKnativeNotInstalled: a managed Knative backend was asked for, but
	// the cluster serves no serving.knative.dev/v1 Service.
	ReasonKnativeNotInstalled = "KnativeNotInstalled"
)

// Reasons of the Ready and Training conditions.
const (
	// ReasonServersReady: every server is ready.
	ReasonServersReady = "ServersReady"
	// ReasonServersNotReady: some server is not ready yet.
	ReasonServersNotReady = "ServersNotReady"
	// ReasonPodsCannotStart: some server pod cannot be created, scheduled or
	// started; the message names the pod and the cause the StatefulSet or
	// ReplicaSet controller, the scheduler or the kubelet gave.
	ReasonPodsCannotStart = "PodsCannotStart"
	// ReasonTraining: the servers are ready and epochs are running.
	ReasonTraining = "Training"
	// ReasonWaitingForServers: training waits for the servers to be ready.
	ReasonWaitingForServers = "WaitingForServers"
	// ReasonFinished: the job succeeded or failed and its servers are scaled
	// to zero.
	ReasonFinished = "Finished"
	// ReasonPartitioning: the partition step (a Job) is cutting the dataset
	// into spec.dataset.partitionTo; the servers wait at zero.
	ReasonPartitioning = "Partitioning"
)

// Reasons of the Suspended condition (ReasonSuspended also explains a false
// Ready or Training).
const (
	// ReasonSuspended: spec.runPolicy.suspend is true; servers are at zero.
	ReasonSuspended = "Suspended"
	// ReasonNotSuspended: the job has never been suspended.
	ReasonNotSuspended = "NotSuspended"
	// ReasonResumed: the job was suspended and has been resumed.
	ReasonResumed = "Resumed"
	// ReasonWaitingForAdmission: the job is queued in Kueue (label
	// kueue.x-k8s.io/queue-name) and its Workload is not admitted yet.
	ReasonWaitingForAdmission = "WaitingForAdmission"
	// ReasonEvicted: Kueue evicted the job's Workload (preempted it, or
	// stopped its queue); the job waits to be admitted again.
	ReasonEvicted = "Evicted"
	// ReasonAdmitted: Kueue admitted the job's Workload; the servers run.
	ReasonAdmitted = "Admitted"
)

// Reasons of the Succeeded condition.
const (
	// ReasonEpochsCompleted: graph server 0 reported the last epoch.
	ReasonEpochsCompleted = "EpochsCompleted"
	// ReasonTargetAccuracyReached: the validation accuracy reached
	// spec.training.targetAccuracy.
	ReasonTargetAccuracyReached = "TargetAccuracyReached"
)

// Reasons of the Failed condition.
const (
	// ReasonBackoffLimitExceeded: a server failed after the job had restarted
	// spec.runPolicy.backoffLimit times.
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	// ReasonServerFailed: a server of a job without checkpoints failed (its
	// container exited or was killed); there is nothing to resume from.
	ReasonServerFailed = "ServerFailed"
	// ReasonDeadlineExceeded: spec.runPolicy.activeDeadlineSeconds passed.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonBudgetExceeded: the reported cost reached spec.runPolicy.budgetUSD.
	ReasonBudgetExceeded = "BudgetExceeded"
	// ReasonTrainingError: graph server 0 reported an unrecoverable error.
	ReasonTrainingError = "TrainingError"
	// ReasonPartitioningFailed: the partition step failed; the message
	// quotes its last log line.
	ReasonPartitioningFailed = "PartitioningFailed"
)
