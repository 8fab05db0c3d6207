package graphserver

import (
	"context"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// variant is what differs between the models a graph server trains (gcn.go, gat.go, sage.go):
// the tasks other than SC, ∇SC and WU, which tasks.go runs alike for all.
type variant interface {
	// run runs a local interval's AV_l (at l = L, the loss on the logits), GA_l, ∇GA_l or
	// ∇AV_l and returns the loss of the output layer's AV.
	run(ctx context.Context, st pipeline.Started) (loss float64, err error)
	// gradient returns the gradient of parameter tensor i that WU task t pushes.
	gradient(t pipeline.Task, i int) *tensor.Dense
	// evalForward runs AV_l of interval i in an evaluation pass with the weights w: from b.in
	// (or the features) into b.p and, for a GAT, b.scores.
	evalForward(ctx context.Context, i, l int, w []*tensor.Dense, b passBuffers) error
	// evalGather runs GA_l of an evaluation pass, once b.p's ghost rows are in: into b.z.
	evalGather(ctx context.Context, l int, b passBuffers) error
	// logits returns the evaluation's logits, given the output layer's Z.
	logits(w []*tensor.Dense, z *tensor.Dense) (*tensor.Dense, error)
	// embeddings returns the input of the last layer, σ(Z_{L-2}), given Z_{L-2}.
	embeddings(w []*tensor.Dense, z *tensor.Dense) *tensor.Dense
	// slots names the parameter tensors w by their export names.
	slots(w []*tensor.Dense) []export.Slot
}

// modelShape is a model's shape as the rest of the server sees it.
type modelShape struct {
	dims   []int    // widths of the input and of P_l of every layer
	widths []int    // [layer]: width of the rows SC_l and ∇SC_l exchange (P_l, then a GAT's s_src)
	params [][2]int // rows and columns of every parameter tensor (the parameter servers' "layers")
	// initDims, heads and outHeads are the parameter servers' view (rpc.InitRequest).
	initDims        []uint32
	heads, outHeads uint32
	sage            bool // GraphSAGE's weights (rpc.InitRequest.Sage)
}

// passBuffers are the buffers of one layer of an evaluation pass.
type passBuffers struct {
	in     *tensor.Dense // Z_{l-1}, owned rows; nil in layer 0
	p      *tensor.Dense // P_l, owned then ghost rows
	scores *tensor.Dense // a GAT's s_src, owned then ghost rows; nil for a GCN
	self   *tensor.Dense // GraphSAGE's S_l, owned rows; nil for the others
	z      *tensor.Dense // Z_l, owned rows
}

// selfRower is a model whose Gathers add rows of its own to P_l's (GraphSAGE's S_l).
type selfRower interface {
	// selfRows returns the rows of layer l in slot 0 of training's buffers.
	selfRows(l int) *tensor.Dense
}

// passBuffers returns training's buffers as an evaluation pass's: slot 0 of P_l (and a GAT's
// s_src, GraphSAGE's S_l), and parity 0 of Z_l. Only a pass that runs when no training task
// will run again may use them (evaluator.buffers).
func (b *layout) passBuffers(m variant) []passBuffers {
	sr, _ := m.(selfRower)
	out := make([]passBuffers, b.layers())
	for l := range out {
		out[l] = passBuffers{p: b.p[l][0], scores: b.scoresOf(l, 0), z: b.z[0][l]}
		if l > 0 {
			out[l].in = out[l-1].z
		}
		if sr != nil {
			out[l].self = sr.selfRows(l)
		}
	}
	return out
}

// newPassBuffers returns buffers of the shapes of passBuffers' for a pass beside training.
func newPassBuffers(b *layout, m variant) []passBuffers {
	_, sage := m.(selfRower)
	rows := b.part.Owned + len(b.part.Ghosts)
	out := make([]passBuffers, b.layers())
	for l := range out {
		d := b.dims[l+1]
		out[l] = passBuffers{p: tensor.NewDense(rows, d), z: tensor.NewDense(b.part.Owned, d)}
		if h := b.widths[l] - d; h > 0 {
			out[l].scores = tensor.NewDense(rows, h)
		}
		if sage {
			out[l].self = tensor.NewDense(b.part.Owned, d)
		}
		if l > 0 {
			out[l].in = out[l-1].z
		}
	}
	return out
}

// taskEnv is what the models' tasks use besides the buffers.
type taskEnv struct {
	backend dispatch.Backend
	weights *weightCache
	seed    uint64
	// holder, in the pull data path, returns the address of the parameter server that holds
	// a layer's weight; nil otherwise.
	holder func(layer int) string
	// rec records the waits inside tasks (weight pulls, and calls when remote: the backend's
	// tensor tasks run on functions, but those place runs in the graph server); nil: none.
	rec    *trace.Recorder
	remote bool
	place  *dispatch.Placement
}
