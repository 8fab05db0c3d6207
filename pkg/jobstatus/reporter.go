package jobstatus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// FieldManager is the server-side-apply manager of status.progress.
const FieldManager = "dorylus-graph-server"

// Environment variables naming the job (the same as package jobconfig's).
const (
	EnvJobName   = "DORYLUS_JOB_NAME"
	EnvNamespace = "DORYLUS_NAMESPACE"
)

// GroupVersionResource is the GNNTrainingJob resource.
var GroupVersionResource = schema.GroupVersionResource{Group: "dorylus.dev", Version: "v1alpha1", Resource: "gnntrainingjobs"}

// ErrNegative is returned for a negative loss, accuracy or cost.
var ErrNegative = errors.New("negative progress value")

// Progress is one report: the state after the epoch just completed.
type Progress struct {
	// Epoch is the last completed epoch (1-based).
	Epoch int
	// Loss is the training loss of that epoch.
	Loss float64
	// TrainAccuracy, ValAccuracy and TestAccuracy are in [0, 1].
	TrainAccuracy, ValAccuracy, TestAccuracy float64
	// CostUSD is the estimated cost so far, EpochCostUSD that of the last epoch.
	CostUSD, EpochCostUSD float64
	// TensorCalls are the function calls (Lambda, Knative) of the run so far, retries and
	// relaunches included; LocalTensorTasks the tensor tasks placement ran in the graph
	// servers instead.
	TensorCalls, LocalTensorTasks int64
	// GraphServerPeakMemoryBytes is the largest peak resident memory of any graph server
	// so far (0: unknown).
	GraphServerPeakMemoryBytes int64
	// LastCheckpointEpoch is the epoch of the newest checkpoint, if any.
	LastCheckpointEpoch *int
	// FailureMessage, when set, reports an unrecoverable error and where it
	// happened; the operator then fails the job.
	FailureMessage string
	// Outputs are the names of the files written to the job's output, once
	// every one is written.
	Outputs []string
}

// Reporter writes progress into one job's status.
type Reporter struct {
	client    dynamic.Interface
	namespace string
	name      string
	now       func() time.Time
}

// New returns a reporter for job namespace/name talking to the API server of
// cfg.
func New(cfg *rest.Config, namespace, name string) (*Reporter, error) {
	if namespace == "" || name == "" {
		return nil, errors.New("jobstatus: namespace and job name are required")
	}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("jobstatus: client: %w", err)
	}
	return &Reporter{client: c, namespace: namespace, name: name, now: time.Now}, nil
}

// NewInCluster returns a reporter for the job named by DORYLUS_NAMESPACE and
// DORYLUS_JOB_NAME, authenticated by the pod's ServiceAccount.
func NewInCluster() (*Reporter, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("jobstatus: in-cluster config: %w", err)
	}
	return New(cfg, os.Getenv(EnvNamespace), os.Getenv(EnvJobName))
}

// Report writes p as the job's status.progress.
func (r *Reporter) Report(ctx context.Context, p Progress) error {
	progress, err := progressObject(p, r.now())
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersionResource.GroupVersion().String(),
		"kind":       "GNNTrainingJob",
		"metadata":   map[string]any{"name": r.name, "namespace": r.namespace},
		"status":     map[string]any{"progress": progress},
	}}
	_, err = r.client.Resource(GroupVersionResource).Namespace(r.namespace).
		ApplyStatus(ctx, r.name, u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("jobstatus: report epoch %d of %s/%s: %w", p.Epoch, r.namespace, r.name, err)
	}
	return nil
}

// PartitionerFieldManager is the field manager of the partition step's
// status.partitions.
const PartitionerFieldManager = "dorylus-partitioner"

// Partitions is the cut of a job's partition files, as the partition step
// reports it.
type Partitions struct {
	Parts   int
	Method  string
	EdgeCut float64 // the fraction of adjacency entries cut
	Ghosts  int64
	Balance float64 // the heaviest part's weight over the mean
	Reused  bool    // found at the location rather than cut
}

// ReportPartitions sets the job's status.partitions (server-side apply,
// field manager PartitionerFieldManager).
func (r *Reporter) ReportPartitions(ctx context.Context, p Partitions) error {
	if p.Parts < 1 || p.Ghosts < 0 || !(p.EdgeCut >= 0 && p.EdgeCut <= 1) || !(p.Balance >= 0) || math.IsInf(p.Balance, 0) {
		return fmt.Errorf("jobstatus: partitions %+v: want parts ≥ 1, an edge cut in [0, 1], ghosts and balance not negative", p)
	}
	obj := map[string]any{
		"parts":   int64(p.Parts),
		"method":  p.Method,
		"edgeCut": strconv.FormatFloat(p.EdgeCut, 'f', 4, 64),
		"ghosts":  p.Ghosts,
		"balance": strconv.FormatFloat(p.Balance, 'f', 4, 64),
	}
	if p.Reused {
		obj["reused"] = true
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersionResource.GroupVersion().String(),
		"kind":       "GNNTrainingJob",
		"metadata":   map[string]any{"name": r.name, "namespace": r.namespace},
		"status":     map[string]any{"partitions": obj},
	}}
	if _, err := r.client.Resource(GroupVersionResource).Namespace(r.namespace).
		ApplyStatus(ctx, r.name, u, metav1.ApplyOptions{FieldManager: PartitionerFieldManager, Force: true}); err != nil {
		return fmt.Errorf("jobstatus: report the partitions of %s/%s: %w", r.namespace, r.name, err)
	}
	return nil
}

// Reported returns the cost and the tensor task counts status.progress holds (CostUSD,
// TensorCalls, LocalTensorTasks; 0 where none): what earlier launches of the run reported, for
// a restarted graph server 0 to go on from.
func (r *Reporter) Reported(ctx context.Context) (Progress, error) {
	u, err := r.client.Resource(GroupVersionResource).Namespace(r.namespace).Get(ctx, r.name, metav1.GetOptions{}, "status")
	if err != nil {
		return Progress{}, fmt.Errorf("jobstatus: read the status of %s/%s: %w", r.namespace, r.name, err)
	}
	return reported(u.Object)
}

// reported reads Reported's fields from a job object; nothing on an error.
func reported(job map[string]any) (Progress, error) {
	var p Progress
	s, found, err := unstructured.NestedString(job, "status", "progress", "costUSD")
	if err != nil {
		return Progress{}, fmt.Errorf("jobstatus: status.progress.costUSD: %w", err)
	}
	if found {
		if p.CostUSD, err = strconv.ParseFloat(s, 64); err != nil {
			return Progress{}, fmt.Errorf("jobstatus: status.progress.costUSD %q: %w", s, err)
		}
	}
	for _, f := range []struct {
		key string
		n   *int64
	}{{"tensorCalls", &p.TensorCalls}, {"localTensorTasks", &p.LocalTensorTasks}} {
		if *f.n, _, err = unstructured.NestedInt64(job, "status", "progress", f.key); err != nil {
			return Progress{}, fmt.Errorf("jobstatus: status.progress.%s: %w", f.key, err)
		}
	}
	return p, nil
}

// progressObject renders p in the API's form: decimals as strings.
func progressObject(p Progress, now time.Time) (map[string]any, error) {
	if p.Epoch < 0 {
		return nil, fmt.Errorf("%w: epoch %d", ErrNegative, p.Epoch)
	}
	out := map[string]any{
		"epoch":      int64(p.Epoch),
		"updateTime": now.UTC().Format(time.RFC3339),
	}
	failure := p.FailureMessage
	for _, f := range []struct {
		key    string
		v      float64
		format byte
		prec   int
	}{
		{"loss", p.Loss, 'g', 6},
		{"trainAccuracy", p.TrainAccuracy, 'f', 4},
		{"valAccuracy", p.ValAccuracy, 'f', 4},
		{"testAccuracy", p.TestAccuracy, 'f', 4},
		{"costUSD", p.CostUSD, 'g', 6}, // 6 digits: a cpu epoch of a few micro-dollars shows
		{"epochCostUSD", p.EpochCostUSD, 'g', 6},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			if failure == "" {
				failure = fmt.Sprintf("%s is %v at epoch %d", f.key, f.v, p.Epoch)
			}
			continue
		}
		if f.v < 0 {
			return nil, fmt.Errorf("%w: %s %v", ErrNegative, f.key, f.v)
		}
		out[f.key] = strconv.FormatFloat(f.v, f.format, f.prec, 64)
	}
	for _, f := range []struct {
		key string
		n   int64
	}{{"tensorCalls", p.TensorCalls}, {"localTensorTasks", p.LocalTensorTasks}} {
		switch {
		case f.n < 0:
			return nil, fmt.Errorf("%w: %s %d", ErrNegative, f.key, f.n)
		case f.n > 0:
			out[f.key] = f.n
		}
	}
	if p.GraphServerPeakMemoryBytes > 0 {
		out["graphServerPeakMemory"] = resource.NewQuantity(p.GraphServerPeakMemoryBytes, resource.BinarySI).String()
	}
	if p.LastCheckpointEpoch != nil {
		out["lastCheckpointEpoch"] = int64(*p.LastCheckpointEpoch)
	}
	if len(p.Outputs) > 0 {
		names := make([]any, len(p.Outputs))
		for i, n := range p.Outputs {
			names[i] = n
		}
		out["outputs"] = names
	}
	if failure != "" {
		if len(failure) > 1024 {
			failure = failure[:1021] + "..."
		}
		out["failureMessage"] = failure
	}
	return out, nil
}
