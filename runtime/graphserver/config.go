package graphserver

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// Config is what one graph server needs.
type Config struct {
	Partition, Partitions int
	Intervals             int                  // per graph server (every server must use the same number)
	Data                  *graph.PartitionData // this server's partition (graph.ReadPartitionFile)
	Peers                 []string             // address of the graph server of every partition (own included)
	ParamServers          []string             // address of every parameter-server shard
	Run                   string               // the run's identity, shared by all its servers
	Attempt               int                  // the job's restart this server was started in (Hello)

	Layers, Hidden int
	// Heads > 0 trains a GAT (pkg/model): Heads attention heads of Hidden features in every
	// hidden layer, OutHeads in the output layer, dropout AttentionDropout on the attention
	// coefficients. Heads == 0 trains a GCN, or with SAGE a GraphSAGE network.
	Heads, OutHeads  int
	SAGE             bool
	AttentionDropout float64
	Dropout          float64
	LearningRate     float64
	WeightDecay      float64
	Epochs           int
	Seed             uint64
	// Staleness is synchronous training or the bound S of the asynchronous pipeline
	// (pipeline.Config.Staleness).
	Staleness jobconfig.Staleness
	// DrainEvery, in asynchronous mode, drains the pipeline every this many epochs
	// (pipeline.Config.DrainEvery): the epoch boundaries where the parameter servers take their
	// checkpoints. 0 never drains.
	DrainEvery int
	// UpdateEvery, in asynchronous mode, is how many of the server's intervals sum their
	// gradients of an epoch into one push to the parameter servers (its zero value: all of
	// them, one update per server per epoch). Synchronous mode pushes every interval's, which
	// the parameter servers sum in a fixed order.
	UpdateEvery    jobconfig.UpdateEvery
	TargetAccuracy float64 // stop once the validation accuracy reaches it (0: never)
	EvalEvery      int     // evaluate every this many epochs, and after the last
	// Patience > 0 selects by validation as the GAT paper does (model.BestValidation, with
	// EvalEvery 1): the result is the evaluation of the kept epoch, and the run stops after
	// Patience evaluations without progress.
	Patience int

	Backend dispatch.Backend
	// Pull, when set, selects the pull data path: the server serves it (the inputs of its
	// tasks in flight) beside its own service, and its GCN tensor tasks name their weight by
	// version and parameter server (the backend must be built with the same store).
	Pull rpc.TaskSourceServer
	// TLS, when set, makes every gRPC link mutual TLS with the job's credentials (served
	// and dialled); nil runs them in plaintext (an insecure run).
	TLS *pki.Credentials
	// Health, when set, serves the server's health alone in plaintext (rpc.ServeHealth), for
	// readiness probes.
	Health net.Listener
	// Events receives the coordinator's progress as JSON lines (graph server 0 only).
	Events io.Writer
	// Startup bounds the wait for peers to come up; 0 waits as long as it takes.
	Startup time.Duration
	// DeadAfter is how long a peer (graph or parameter server) may fail its health checks
	// before the run fails naming it (rpc.DefaultDeadAfter if 0).
	DeadAfter time.Duration

	// Status, when set on graph server 0, receives the progress after every epoch (at most
	// once per StatusInterval, DefaultStatusInterval if 0) and the final result at once; Run
	// waits at most StatusFlush (DefaultStatusFlush if 0) for the last report before it
	// returns. A failed report is written to Log and never stops training.
	Status         ProgressReporter
	StatusInterval time.Duration
	StatusFlush    time.Duration
	// Log receives warnings, such as failed status reports; nil discards them.
	Log io.Writer
	// Export, when set, has the run write its model and outputs at the end.
	Export *Export
	// Weights, when set, make the run an inference: no parameter servers and no training, only
	// the export pass with these parameters (named as pkg/export names them), which must fit
	// the model (export.Load). Export then writes the outputs and a manifest, not a model.
	Weights []safetensors.Tensor

	// Cost, when set on graph server 0, prices the run after every epoch (Event.CostUSD and
	// EpochCostUSD, the status's cost): its servers held since Started (when Run began if
	// zero) and the billed tensor calls of every graph server (dispatch.Biller). The first
	// epoch whose cost reaches Cost.BudgetUSD goes to Status at once and is the run's last:
	// the run stops within one epoch of its budget, and its result keeps that cost.
	Cost    *cost.Run
	Started time.Time
	// CostBefore is the cost of the run's earlier launches, which Cost's adds to, and
	// CallsBefore their function calls (Requests) and local tensor tasks (Local), which the
	// status's counts add to: what the job's status held when graph server 0 (re)started.
	CostBefore  float64
	CallsBefore cost.Calls

	// Trace, when set, records every task and wait of the server's intervals (pkg/trace).
	Trace *trace.Recorder

	// Metrics, when set, receives the server's Prometheus series (metrics.go), labelled with
	// its partition.
	Metrics prometheus.Registerer

	// Preempt, when it closes (the process's SIGTERM), preempts the run (preempt.go): every
	// graph server finishes the epochs any of them may have started and stops there, at an
	// epoch boundary the parameter servers checkpoint, and Run returns ErrPreempted.
	// DrainTimeout bounds that drain (jobconfig.DefaultDrainTimeout if 0).
	Preempt      <-chan struct{}
	DrainTimeout time.Duration
}

// Export has a run write its model and per-vertex outputs at the end (pkg/export): after the
// final evaluation, every graph server runs one more pass with the weights that evaluation
// reported (with Config.Patience, those of the kept epoch) and writes its own vertices'
// predictions, probabilities and embeddings with their dataset ids; graph server 0 then
// writes the weights, the index of the partitions' files, the history, the curves and, last,
// the card, and reports an EventExported.
//
// With Config.Weights (an inference), graph server 0 writes the index and a manifest
// (predict.json) instead of the model.
type Export struct {
	Store checkpoint.Store
	// Card describes the model; graph server 0 adds the seed, epochs, accuracies and files.
	// For an inference it is the card of the model run.
	Card export.Card
	// Model says where an inference's model was read from, for the manifest.
	Model string
}

// maxSources bounds the intervals of a run (partitions × intervals), whose indices, and one
// more, layout.source holds.
const maxSources = math.MaxUint16

func (c *Config) validate() error {
	switch {
	case c.Partitions < 1 || c.Partition < 0 || c.Partition >= c.Partitions:
		return fmt.Errorf("partition %d of %d", c.Partition, c.Partitions)
	case len(c.Peers) != c.Partitions:
		return fmt.Errorf("%d peer addresses for %d partitions", len(c.Peers), c.Partitions)
	case len(c.ParamServers) < 1 && c.Weights == nil:
		return errors.New("no parameter server addresses")
	case c.Weights != nil && (len(c.ParamServers) > 0 || c.Export == nil):
		return errors.New("inference needs an output location and no parameter servers")
	case c.Intervals < 1 || c.Partitions*c.Intervals > maxSources:
		return fmt.Errorf("%d intervals on %d partitions: want 1 or more, at most %d in all", c.Intervals, c.Partitions, maxSources)
	case c.Epochs < 1:
		return fmt.Errorf("%d epochs", c.Epochs)
	case c.DrainEvery < 0:
		return fmt.Errorf("drain every %d epochs", c.DrainEvery)
	case c.EvalEvery < 1:
		return fmt.Errorf("evaluation every %d epochs", c.EvalEvery)
	case c.Patience < 0 || (c.Patience > 0 && c.EvalEvery != 1):
		return fmt.Errorf("patience %d with evaluation every %d epochs: selection by validation evaluates every epoch", c.Patience, c.EvalEvery)
	case c.Backend == nil:
		return errors.New("no tensor backend")
	case c.Heads < 0 || (c.Heads > 0 && c.OutHeads < 1):
		return fmt.Errorf("GAT with %d heads and %d output heads", c.Heads, c.OutHeads)
	case c.SAGE && c.Heads > 0:
		return fmt.Errorf("GraphSAGE with %d attention heads", c.Heads)
	}
	if c.Cost != nil {
		return c.Cost.Validate()
	}
	return nil
}

// Slots returns R, the number of epochs of P_l and dZ_l a graph server keeps under staleness st
// for a model of heads attention heads (Config.Heads; 0: a GCN): 1 in synchronous mode; 2 for
// an asynchronous GCN, whose writers wait for the Gathers that read the epoch they overwrite
// (guard.go); 2S+2 for an asynchronous GAT with staleness S, whose backward pass reads the rows
// its forward pass read (a reader at epoch e reads no older than e-S-1, and no interval runs
// past e+S meanwhile).
func Slots(st jobconfig.Staleness, heads int) int {
	switch {
	case st.Sync():
		return 1
	case guardsSlots(st, heads):
		return 2
	}
	return 2*st.Bound() + 2
}

func (c *Config) slots() int { return Slots(c.Staleness, c.Heads) }

// updateSize returns how many of the server's intervals one push sums.
func (c *Config) updateSize() int {
	if c.Staleness.Sync() {
		return 1
	}
	return c.UpdateEvery.Size(c.Intervals)
}

// contributions returns the pushes the parameter servers count an epoch, of all graph servers.
func (c *Config) contributions() int {
	if c.Staleness.Sync() {
		return c.Partitions * c.Intervals
	}
	return c.Partitions * c.UpdateEvery.PerEpoch(c.Intervals)
}

// GhostSlots returns G, the number of epochs of the ghost rows of P_l and dZ_l a graph server
// keeps: 1 under a guard (an asynchronous GCN or GraphSAGE network: a peer's batch waits for
// the Gathers reading the ghost rows it overwrites, guard.go), else R (Slots).
func GhostSlots(st jobconfig.Staleness, heads int) int {
	if guardsSlots(st, heads) {
		return 1
	}
	return Slots(st, heads)
}

func (c *Config) ghostSlots() int { return GhostSlots(c.Staleness, c.Heads) }

// guardsSlots reports whether a run keeps its owned rows in two slots and its ghost rows in one
// under a slotGuard: an asynchronous GCN (or GraphSAGE network).
func guardsSlots(st jobconfig.Staleness, heads int) bool { return !st.Sync() && heads == 0 }

func (c *Config) guardsSlots() bool { return guardsSlots(c.Staleness, c.Heads) }

// gradients returns the backward pass's cut: a GCN pulls gradients (dZ rows shipped to ghosts,
// as P rows are), a GAT pushes contributions.
func (c *Config) gradients() pipeline.GradientFlow {
	if c.Heads > 0 {
		return pipeline.PushGradients
	}
	return pipeline.PullGradients
}

// EpochsInFlight returns how many epochs of one interval a graph server runs at once: 2 when
// the backward pass of an epoch overlaps the next forward pass (pipeline.Config.TailOverlap: a
// GCN, heads == 0, in asynchronous mode with staleness ≥ 1), so that an interval may have two
// tensor tasks in flight; otherwise 1.
func EpochsInFlight(st jobconfig.Staleness, heads int) int {
	if !st.Sync() && st.Bound() > 0 && heads == 0 {
		return 2
	}
	return 1
}
