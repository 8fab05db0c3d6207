package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// FieldOwner is the server-side-apply field manager of everything the
// operator writes.
const FieldOwner = "dorylus-operator"

// Labels on every child object and pod of a job.
const (
	// LabelJobName holds the owning GNNTrainingJob's name.
	LabelJobName = "dorylus.dev/job-name"
	// LabelRole is RoleGraphServer, RoleParamServer, RoleFunction or RoleRuntime.
	LabelRole = "dorylus.dev/role"
	// LabelShard holds a parameter server's shard number.
	LabelShard = "dorylus.dev/shard"
	// LabelRun on server pods is the job's status.restarts when the pod was
	// made: the operator deletes the pods of an earlier run (restarts.go).
	LabelRun = "dorylus.dev/run"
	// AnnotationConfigHash on pod templates rolls the pods when run.json changes.
	AnnotationConfigHash = "dorylus.dev/config-hash"
	// AnnotationIRSARole is the EKS annotation binding a ServiceAccount to an IAM role.
	AnnotationIRSARole = "eks.amazonaws.com/role-arn"
	// LabelPodIndex is the StatefulSet pod-index label, the graph server's partition.
	LabelPodIndex = "apps.kubernetes.io/pod-index"
)

// Values of LabelRole.
const (
	RoleGraphServer = "graph-server"
	RoleParamServer = "param-server"
	RoleFunction    = "function"
	RoleRuntime     = "runtime"
)

func configMapName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Name + "-config" }

func graphServerName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Name + "-gs" }

func paramServiceName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Name + "-ps" }

func paramShardName(job *dorylusv1alpha1.GNNTrainingJob, shard int32) string {
	return fmt.Sprintf("%s-ps-%d", job.Name, shard)
}

func runtimeName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Name + "-runtime" }

func knativeServiceName(job *dorylusv1alpha1.GNNTrainingJob) string { return job.Name + "-fn" }

// credentialsSecretName names the Secret of the job's credentials of period:
// a digest of the job's UID and the period, so that each period's name is new
// and a recreated job's never meets a deleted one's (credentials.go).
func credentialsSecretName(job *dorylusv1alpha1.GNNTrainingJob, period string) string {
	sum := sha256.Sum256([]byte(string(job.UID) + "\n" + period))
	return job.Name + "-credentials-" + hex.EncodeToString(sum[:5])
}

// functionCredentialsName names the Secret that a function of the job's
// users, at an https:// url, mounts: the function certificate of the
// current period under a name that does not change (credentials.go).
func functionCredentialsName(job *dorylusv1alpha1.GNNTrainingJob) string {
	return job.Name + "-credentials"
}

// selectorLabels are the labels a role's pods are selected by.
func selectorLabels(job *dorylusv1alpha1.GNNTrainingJob, role string) map[string]string {
	return map[string]string{LabelJobName: job.Name, LabelRole: role}
}

// serverPodLabels are the labels of a server pod of the job's current run.
func serverPodLabels(job *dorylusv1alpha1.GNNTrainingJob, role string) map[string]string {
	l := childLabels(job, role)
	l[LabelRun] = strconv.Itoa(int(job.Status.Restarts))
	return l
}

// childLabels are the labels of a child object or pod: the selector labels
// and the recommended app.kubernetes.io ones.
func childLabels(job *dorylusv1alpha1.GNNTrainingJob, role string) map[string]string {
	l := selectorLabels(job, role)
	l["app.kubernetes.io/name"] = "dorylus"
	l["app.kubernetes.io/instance"] = job.Name
	l["app.kubernetes.io/component"] = role
	l["app.kubernetes.io/managed-by"] = "dorylus-operator"
	return l
}
