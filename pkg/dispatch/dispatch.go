// Package dispatch is the tensor-backend interface: graph servers hand
// the tensor-parallel tasks (AV, the loss, ∇AV; a GAT's AV, ∇AV, AE and ∇AE) of their intervals
// to a Backend, which runs them where it likes — a goroutine pool in the graph server (package
// cpu), Lambda functions or a Knative service — and Execute is the one task code every backend runs, the same pkg/model
// calls the single-process trainer makes.
//
// A Backend has two required methods, Run and Concurrency; what only some backends have is an
// optional interface (Closer, StatsReporter, Biller) checked with a type assertion.
//
// # Wire format
//
// A request travels to a remote worker as the bytes of EncodeRequest and its result comes back
// as EncodeResult's: a versioned little-endian header followed by the tensors as raw
// little-endian float32 (and int32) arrays, each with its shape. A worker refuses another
// version with an error wrapping ErrWireVersion, so a newer worker never misreads an older
// caller.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Op is the tensor task a request asks for.
type Op uint8

// The tensor tasks of a GCN interval, then those of a GAT interval (pkg/model's GAT cut).
const (
	OpForward  Op = 1 // AV_l, l < L: P = drop(σ(input)) W
	OpLoss     Op = 2 // AV_L: masked softmax cross-entropy of the logits and its gradient dZ_{L-1}
	OpBackward Op = 3 // ∇AV_l: dW_l = Hᵀ dP and, for l ≥ 1, dZ_{l-1}

	OpGATForward   Op = 4 // GAT AV_l: P = drop(σ(input)) W and the scores s_dst, s_src of every head
	OpGATBackward  Op = 5 // GAT ∇AV_l: dW, da_dst, da_src and, for l ≥ 1, dZ_{l-1} and db_{l-1}
	OpEdgeForward  Op = 6 // GAT AE_l: the attention coefficients of the in-edges of an interval
	OpEdgeBackward Op = 7 // GAT ∇AE_l: dLoss/du of those in-edges and dLoss/ds_dst of the interval
)

// String returns the task's name.
func (o Op) String() string {
	switch o {
	case OpForward:
		return "AV"
	case OpLoss:
		return "loss"
	case OpBackward:
		return "∇AV"
	case OpGATForward:
		return "GAT AV"
	case OpGATBackward:
		return "GAT ∇AV"
	case OpEdgeForward:
		return "AE"
	case OpEdgeBackward:
		return "∇AE"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// IsGAT reports whether the op is one of GAT's tasks, which take their model from
// TaskRequest.GAT.
func (o Op) IsGAT() bool { return o >= OpGATForward && o <= OpEdgeBackward }

// TaskRequest is one tensor task on one interval of rows.
type TaskRequest struct {
	Op        Op
	Model     model.GCNConfig // the GCN ops' model
	GAT       model.GATConfig // the GAT ops' model
	Layer     int             // the weight index l (OpForward, OpBackward, every GAT op)
	RowOffset int             // global id of the interval's first row: keys the dropout masks
	RowIDs    []int32         // when set, row r's masks are keyed by RowIDs[r] (its original id) instead
	Key       uint64          // model.DropoutKey(seed, epoch, Layer); the edge ops: model.AttentionKey
	Train     bool            // apply dropout

	Features graph.Features // layer 0's input rows
	Z        *tensor.Dense  // layer ≥ 1's input rows Z_{l-1}; OpLoss: the logits
	W        *tensor.Dense  // the layer's weight (OpForward, OpBackward)
	DP       *tensor.Dense  // OpBackward: dLoss/dP_l of the rows
	Labels   []int32        // OpLoss: the label of each row
	Rows     []int32        // OpLoss: the rows that count (the interval's training rows)
	Total    int            // OpLoss: training rows of the whole graph

	// GAT: the layer's attention vectors (OpGATForward, OpGATBackward), b_{l-1} for l ≥ 1,
	// and for OpGATBackward the forward P of the rows and dLoss/ds_dst, dLoss/ds_src (DP is
	// dLoss/dP; the task adds the score gradients into it).
	ADst, ASrc, PrevBias *tensor.Dense
	P, DDst, DSrc        *tensor.Dense
	// GAT edge ops: the in-edges of the interval's destinations (row r: destination
	// RowOffset+r; columns index SrcScore), the scores of both ends, the global id of every
	// column (nil: the column is the id) and, for OpEdgeBackward, dLoss/dα̃ of the edges.
	Adj                *tensor.CSR
	DstScore, SrcScore *tensor.Dense
	SrcIDs             []int32
	DAlpha             *tensor.Dense

	// Optional destinations, written when set: Out receives P (OpForward, OpGATForward),
	// dZ_{L-1} (OpLoss), dZ_{l-1} (OpBackward, OpGATBackward, l ≥ 1), α̃ (OpEdgeForward) or
	// dLoss/du (OpEdgeBackward); DW receives dW_l; OutDst and OutSrc the scores s_dst, s_src
	// (OpGATForward), OutDst dLoss/ds_dst (OpEdgeBackward); DADst, DASrc, DBias the gradients of
	// the attention vectors and of b_{l-1} (OpGATBackward). Gradients are overwritten.
	Out, DW             *tensor.Dense
	OutDst, OutSrc      *tensor.Dense
	DADst, DASrc, DBias *tensor.Dense
	// Pull mode (GCN ops): when WeightSource is set, a function that fetches the task's inputs
	// pulls W instead as layer Layer of version WeightVersion from the parameter server at
	// WeightSource, the part of it WeightHalf names; W must then be that part of that
	// version's weight.
	WeightVersion uint64
	WeightSource  string
	WeightHalf    WeightHalf
	// Act and GATAct, when set, are activation buffers an in-process backend may reuse;
	// remote backends ignore them. ActKept (OpBackward) says that Act holds what the forward
	// pass of the task's epoch and layer computed into it, so that the task need not
	// recompute it; it does not travel.
	Act     *model.Activation
	GATAct  *model.GATActivation
	ActKept bool
}

// WeightHalf names the part of a layer's weight stored on the parameter server that a
// pull-mode task computes with (TaskRequest.WeightHalf).
type WeightHalf uint8

const (
	// WeightWhole is a GCN layer's weight, dims[l] × dims[l+1].
	WeightWhole WeightHalf = iota
	// WeightSelf is W_self, the first dims[l] rows of a GraphSAGE layer's [W_self; W_neigh].
	WeightSelf
	// WeightNeigh is W_neigh, the dims[l] rows after W_self.
	WeightNeigh
)

// TaskResult is what a task produced.
type TaskResult struct {
	Out  *tensor.Dense // P, dZ_{L-1}, dZ_{l-1}, α̃ or dLoss/du; nil for ∇AV_0
	DW   *tensor.Dense // OpBackward, OpGATBackward
	Loss float64       // OpLoss: the rows' share of the mean training loss
	// GAT: the scores (OpGATForward; Dst is dLoss/ds_dst for OpEdgeBackward) and the
	// attention-vector and previous-bias gradients (OpGATBackward; DBias nil in layer 0).
	Dst, Src            *tensor.Dense
	DADst, DASrc, DBias *tensor.Dense
}

// Destinations returns the request's destination buffers as a TaskResult, the form
// DecodeResult copies a remote result into.
func (r *TaskRequest) Destinations() TaskResult {
	return TaskResult{Out: r.Out, DW: r.DW, Dst: r.OutDst, Src: r.OutSrc, DADst: r.DADst, DASrc: r.DASrc, DBias: r.DBias}
}

// Backend runs tensor tasks. Run blocks until the task is done, ctx ends, or the backend
// gives up on it; it is safe for concurrent use.
type Backend interface {
	Run(ctx context.Context, req TaskRequest) (TaskResult, error)
	// Concurrency is how many tasks the backend runs at once; more calls wait.
	Concurrency() int
}

// Closer is implemented by backends that hold resources.
type Closer interface {
	Close() error
}

// Stats counts a backend's work.
type Stats struct {
	Calls int64         // tasks run
	Busy  time.Duration // summed time of the tasks, from start to result
}

// StatsReporter is implemented by backends that count their work.
type StatsReporter interface {
	Stats() Stats
}

// Biller is implemented by backends whose calls are billed (Lambda, Knative): Billing returns
// the calls sent so far and their billed duration.
type Biller interface {
	Billing() cost.Calls
}

// ErrRequest wraps every error Execute returns for a malformed request.
var ErrRequest = errors.New("bad tensor task request")

// MaxLayers is the deepest model a request may describe: its layer count comes off the wire
// and sizes the model's list of widths.
const MaxLayers = 1024

// NumRows returns the number of rows the request's task works on.
func (r *TaskRequest) NumRows() int {
	switch {
	case r.Op == OpEdgeForward || r.Op == OpEdgeBackward:
		if r.Adj != nil {
			return r.Adj.Rows
		}
		return 0
	case r.Op != OpLoss && r.Layer == 0 && r.Features.Sparse != nil:
		return r.Features.Sparse.Rows
	case r.Op != OpLoss && r.Layer == 0 && r.Features.Dense != nil:
		return r.Features.Dense.Rows
	case r.Z != nil:
		return r.Z.Rows
	}
	return 0
}

// Validate checks the request's shapes, so that no kernel sees a mismatch, and returns an
// error wrapping ErrRequest for the first problem. A CSR's entries it trusts: they were checked
// as they came in (DecodeRequest, pkg/graph's loaders).
func (r *TaskRequest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %v layer %d: %s", ErrRequest, r.Op, r.Layer, fmt.Sprintf(format, args...))
	}
	switch {
	case r.RowIDs != nil && len(r.RowIDs) != r.NumRows():
		return bad("%d row ids for %d rows", len(r.RowIDs), r.NumRows())
	case slices.ContainsFunc(r.RowIDs, func(id int32) bool { return id < 0 }):
		return bad("negative row id")
	}
	if r.Op.IsGAT() {
		return r.validateGAT(bad)
	}
	if err := r.Model.Validate(); err != nil {
		return bad("%v", err)
	}
	if r.Model.Layers > MaxLayers {
		return bad("%d layers, want at most %d", r.Model.Layers, MaxLayers)
	}
	dims := r.Model.Dims()
	n := r.NumRows()
	if r.Op == OpLoss {
		switch {
		case r.Z == nil || r.Z.Validate() != nil || r.Z.Cols != dims[len(dims)-1]:
			return bad("logits must be a %d-column block", dims[len(dims)-1])
		case len(r.Labels) != n:
			return bad("%d labels for %d rows", len(r.Labels), n)
		case r.Out != nil && (r.Out.Rows != n || r.Out.Cols != r.Z.Cols):
			return bad("output is %dx%d, want %dx%d", r.Out.Rows, r.Out.Cols, n, r.Z.Cols)
		case len(r.Rows) > 0 && r.Total < len(r.Rows):
			return bad("%d training rows, but %d in the whole graph", len(r.Rows), r.Total)
		}
		for _, row := range r.Rows {
			if row < 0 || int(row) >= n || r.Labels[row] < 0 || int(r.Labels[row]) >= r.Z.Cols {
				return bad("row %d out of range or without a valid label", row)
			}
		}
		return nil
	}
	if r.Op != OpForward && r.Op != OpBackward {
		return bad("unknown op")
	}
	switch {
	case r.Layer < 0 || r.Layer >= r.Model.Layers:
		return bad("no such layer")
	case r.W == nil || r.W.Validate() != nil || r.W.Rows != dims[r.Layer] || r.W.Cols != dims[r.Layer+1]:
		return bad("weight must be %dx%d", dims[r.Layer], dims[r.Layer+1])
	case r.Layer == 0 && r.Features.Sparse == nil && r.Features.Dense == nil:
		return bad("no input features")
	case r.Layer == 0 && r.Features.Sparse != nil && csrShape(r.Features.Sparse) != nil:
		return bad("input features: %v", csrShape(r.Features.Sparse))
	case r.Layer == 0 && r.Features.Sparse == nil && r.Features.Dense.Validate() != nil:
		return bad("input features: %v", r.Features.Dense.Validate())
	case r.Layer == 0 && r.Features.Cols() != dims[0]:
		return bad("input features are %d columns wide, want %d", r.Features.Cols(), dims[0])
	case r.Layer > 0 && (r.Z == nil || r.Z.Validate() != nil || r.Z.Cols != dims[r.Layer]):
		return bad("input rows Z must be a valid block %d columns wide", dims[r.Layer])
	}
	want := [2]int{n, dims[r.Layer+1]}
	if r.Op == OpBackward {
		if r.DP == nil || r.DP.Validate() != nil || r.DP.Rows != n || r.DP.Cols != dims[r.Layer+1] {
			return bad("dP must be %dx%d", n, dims[r.Layer+1])
		}
		if r.DW != nil && (r.DW.Rows != r.W.Rows || r.DW.Cols != r.W.Cols) {
			return bad("dW must be %dx%d", r.W.Rows, r.W.Cols)
		}
		want = [2]int{n, dims[r.Layer]}
	}
	if r.Out != nil && (r.Out.Rows != want[0] || r.Out.Cols != want[1]) {
		return bad("output is %dx%d, want %dx%d", r.Out.Rows, r.Out.Cols, want[0], want[1])
	}
	return nil
}

// Execute runs a task in the calling goroutine with pkg/model's task functions. A GCN task that
// keeps no activation (req.Act nil, or a backward task's not ActKept) computes a dense one a
// block of rows at a time, and a sparse one in scratch, a buffer to reuse (nil: a fresh one).
func Execute(req *TaskRequest, scratch *model.Activation) (TaskResult, error) {
	if err := req.Validate(); err != nil {
		return TaskResult{}, err
	}
	if req.Op.IsGAT() {
		return executeGAT(req)
	}
	n := req.NumRows()
	out := req.Out
	if req.Op == OpLoss {
		if out == nil {
			out = tensor.NewDense(n, req.Z.Cols)
		}
		loss, err := model.LossForward(req.Z, req.Labels, req.Rows, req.Total, out)
		return TaskResult{Out: out, Loss: loss}, err
	}
	in := &model.AVInput{Layer: req.Layer, Features: req.Features, Z: req.Z, RowOffset: req.RowOffset, RowIDs: req.RowIDs, Key: req.Key, Train: req.Train}
	act, err := activation(req, in, scratch)
	if err != nil {
		return TaskResult{}, err
	}
	if req.Op == OpForward {
		if out == nil {
			out = tensor.NewDense(n, req.W.Cols)
		}
		err = req.Model.AVForward(in, req.W, act, out)
		return TaskResult{Out: out}, err
	}
	dw := req.DW
	if dw == nil {
		dw = tensor.NewDense(req.W.Rows, req.W.Cols)
	} else {
		dw.Zero()
	}
	if req.Layer == 0 {
		out = nil
	} else if out == nil {
		out = tensor.NewDense(n, req.W.Rows)
	}
	err = req.Model.AVBackward(in, req.W, act, req.DP, dw, out)
	return TaskResult{Out: out, DW: dw}, err
}

// activation returns the activation a GCN task computes into (forward) or reads (backward): the
// request's own (the forward pass keeps it there, a backward task reads it when ActKept); nil
// for a dense input, which the model then computes a block of rows at a time; for sparse
// features scratch, where a backward task recomputes it (in a fresh one when scratch is nil, as
// AVForward makes one itself).
func activation(req *TaskRequest, in *model.AVInput, scratch *model.Activation) (*model.Activation, error) {
	act := req.Act
	if req.Op == OpBackward && !(req.ActKept && act != nil && (act.Sparse != nil || act.Dense != nil)) {
		act = nil
	}
	switch {
	case act != nil || req.Layer != 0 || req.Features.Sparse == nil:
		return act, nil
	case req.Op == OpForward:
		return scratch, nil
	case scratch == nil:
		scratch = &model.Activation{}
	}
	return scratch, req.Model.Activate(in, scratch)
}

// csrShape checks a CSR's sizes, not its entries: those are checked where a CSR comes in,
// by DecodeRequest (csrCheck) and by pkg/graph's loaders, not again on every task (a full check
// of the features was 4 % of a graph server's CPU).
func csrShape(m *tensor.CSR) error {
	if m.Rows < 0 || len(m.RowPtr) != m.Rows+1 || m.RowPtr[0] != 0 || m.RowPtr[m.Rows] != int64(len(m.ColIdx)) ||
		m.Val != nil && len(m.Val) != len(m.ColIdx) {
		return fmt.Errorf("csr: %d offsets for %d rows, %d entries and %d values", len(m.RowPtr), m.Rows, len(m.ColIdx), len(m.Val))
	}
	return nil
}

// csrCheck validates a CSR without trusting its offsets (tensor.CSR.Validate slices by them).
func csrCheck(m *tensor.CSR) error {
	if err := csrShape(m); err != nil {
		return err
	}
	for i := 1; i < len(m.RowPtr); i++ {
		if m.RowPtr[i] < m.RowPtr[i-1] {
			return fmt.Errorf("csr: offsets decrease at row %d", i-1)
		}
	}
	return m.Validate()
}
