package controllers

import (
	"math"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Grace policy: a training job with checkpoints is preempted by its pods' SIGTERM (a spot
// node's notice, a drain, a deleted pod): the graph servers drain the run to an epoch boundary
// within the drain timeout (--drain-timeout), the parameter servers wait up to
// jobconfig.DrainExit more for them to exit and then save that boundary, and the pods come back
// resuming from it. Every server pod of such a job gets the time this takes as its
// terminationGracePeriodSeconds (terminationGrace): the drain, the exit and the write of the
// job's checkpoint (checkpointBytes) at checkpointRate, at least the Kubernetes default
// minGrace. A job without checkpoints, or an inference, keeps the default: it has nothing to save.

// drainTimeout is the servers' --drain-timeout.
const drainTimeout = jobconfig.DefaultDrainTimeout

// checkpointRate is the rate, in bytes per second, a checkpoint is assumed written at: no rate
// is measured yet, so a conservative one — a single PUT stream to S3 from a busy node or a
// network disk behind a PVC writes several times faster. Write time counts the whole model
// saved by one parameter server, though each saves only its shard, in parallel with the others.
const checkpointRate = 10 << 20

// minGrace is the least grace period given: Kubernetes' default.
const minGrace = 30 * time.Second

// Widths assumed of a dataset the operator cannot see before the servers load it (not
// builtin): larger than most datasets' features and classes, so that its checkpoint is not
// underestimated.
const (
	assumedFeatures = 16384
	assumedClasses  = 1024
)

// builtinWidths are the input features and classes of the builtin datasets (datasets/*/meta.json).
var builtinWidths = map[string][2]int64{
	"cora": {1433, 7}, "citeseer": {3703, 6}, "amazon_computers": {767, 10}, "coauthor_cs": {6805, 15},
}

// checkpointBytes estimates, from above, the size of the job's checkpoint: each parameter's
// weight and its two Adam moments as float32. A layer's weight is its input width by its output
// width, a hidden layer Hidden wide (Heads·Hidden for a GAT, whose attention vectors and biases
// it adds) and GraphSAGE's weights [W_self; W_neigh] twice a GCN's.
func checkpointBytes(spec *dorylusv1alpha1.GNNTrainingJobSpec) int64 {
	in, classes := int64(assumedFeatures), int64(assumedClasses)
	if b := spec.Dataset.Builtin; b != nil {
		if w, ok := builtinWidths[b.Name]; ok {
			in, classes = w[0], w[1]
		}
	}
	m := spec.Model
	width, extra := int64(m.Hidden), int64(0)
	if m.Architecture == dorylusv1alpha1.ArchitectureGAT {
		heads := int64(defaultGATHeads)
		if m.Heads != nil {
			heads = int64(*m.Heads)
		}
		width *= heads
		extra = 3 * max(width, classes) // per layer: a_dst, a_src and the bias
	}
	var params int64
	for l := range int64(max(m.Layers, 1)) {
		rows, cols := width, width
		if l == 0 {
			rows = in
		}
		if l == int64(m.Layers)-1 {
			cols = classes
		}
		params += rows*cols + extra
	}
	if m.Architecture == dorylusv1alpha1.ArchitectureSAGE {
		params *= 2
	}
	return 3 * 4 * params
}

// terminationGrace is the terminationGracePeriodSeconds of the job's server pods, and whether
// the job needs one other than the default (a training job with checkpoints).
func terminationGrace(job *dorylusv1alpha1.GNNTrainingJob) (int64, bool) {
	if job.Spec.Checkpoint == nil || job.Spec.Inference != nil {
		return 0, false
	}
	write := time.Duration(math.Ceil(float64(checkpointBytes(&job.Spec)) / checkpointRate * float64(time.Second)))
	grace := max(drainTimeout+jobconfig.DrainExit+write, minGrace)
	return int64(math.Ceil(grace.Seconds())), true
}

// withGrace gives a server pod of a job with checkpoints its grace period and its container
// the drain timeout the period counts with.
func withGrace(job *dorylusv1alpha1.GNNTrainingJob, spec *corev1ac.PodSpecApplyConfiguration, c *corev1ac.ContainerApplyConfiguration) {
	if grace, ok := terminationGrace(job); ok {
		spec.WithTerminationGracePeriodSeconds(grace)
		c.WithArgs("--drain-timeout", drainTimeout.String())
	}
}
