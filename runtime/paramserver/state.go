package paramserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// state is what a shard holds; only its loop touches it.
type state struct {
	id, shards int
	ctx        context.Context // the loop's: ends when the shard closes

	changed chan struct{} // closed and replaced whenever the newest version, the newest checkpoint or a join moves
	init    *rpc.InitRequest
	agg     aggregation
	layers  []int    // global layer index of each held layer
	shapes  [][2]int // rows and columns of each held layer
	vs      *versions
	adam    *model.Adam
	joined  []bool // per graph server: sent Init since the run (re)started
	// broken, once a checkpoint failed or a graph server restarted in an asynchronous run
	// without checkpoints, answers every call: the run cannot go on
	broken error
	// maxMessage bounds the bytes of the held layers, which one Pull reply carries
	maxMessage int
	advertise  string // the address functions pull from (Init's reply)

	ckpt  *Checkpointing
	saved int // the epoch of the newest checkpoint saved or restored (0: none)
	// starts counts the shard's (re)starts at an epoch (start): a checkpoint written for an
	// earlier one does not move saved
	starts int
	// saving is the checkpoint being written, if any
	saving *saveJob
	// store is held by whoever uses the checkpoint store: one write or read at a time
	store chan struct{}
	// write starts writing a checkpoint outside the loop; its end comes back as saveEnded
	write func(*saveJob)
	// preempt: the shard is preempted (Shard.Preempt), which every Watch stream says
	preempt bool
}

// refused returns the error a call to shard id gets when it is refused with code.
func refused(id int, code codes.Code, format string, args ...any) error {
	return status.Errorf(code, "parameter server %d: %s", id, fmt.Sprintf(format, args...))
}

// initCalled handles an Init: the first sets the shard up, a later one restarts the run at
// the newest epoch boundary (or, with RewindTo, at an older checkpoint) when the graph
// servers restarted (rejoin). The Init then waits until every graph server has joined (join).
func (st *state) initCalled(req *rpc.InitRequest) answer[*rpc.InitReply] {
	if st.broken != nil {
		return answer[*rpc.InitReply]{err: st.broken}
	}
	if st.init != nil {
		a, b := proto.Clone(st.init).(*rpc.InitRequest), proto.Clone(req).(*rpc.InitRequest)
		a.GraphServer, b.GraphServer, b.RewindTo = 0, 0, nil
		if !proto.Equal(a, b) {
			return answer[*rpc.InitReply]{err: refused(st.id, codes.InvalidArgument, "graph server %d describes another run or model (%v) than graph server %d did (%v)",
				req.GraphServer, b, st.init.GraphServer, a)}
		}
		if err := st.rejoin(req); err != nil {
			if st.broken != nil {
				return answer[*rpc.InitReply]{err: st.broken}
			}
			return answer[*rpc.InitReply]{err: refused(st.id, codes.FailedPrecondition, "%v", err)}
		}
		return st.join(int(req.GraphServer))
	}
	if req.RewindTo != nil {
		return answer[*rpc.InitReply]{err: refused(st.id, codes.FailedPrecondition, "asked to go back to epoch %d before any Init", *req.RewindTo)}
	}
	if err := st.setup(req); err != nil {
		code := codes.InvalidArgument
		if errors.Is(err, errCheckpoints) {
			code = codes.DataLoss
		}
		return answer[*rpc.InitReply]{err: refused(st.id, code, "%v", err)}
	}
	st.joined[req.GraphServer] = true
	st.notify()
	return st.join(int(req.GraphServer))
}

// join answers the Init of graph server gs once every graph server has joined since the run
// (re)started, in a run that can restart, so that no graph server starts an epoch whose rows
// a peer that is about to restart would lose; until then it says to wait. It fails with
// Aborted when another graph server's restart began a new start meanwhile: gs must restart
// too.
func (st *state) join(gs int) answer[*rpc.InitReply] {
	switch {
	case st.broken != nil:
		return answer[*rpc.InitReply]{err: st.broken}
	case !st.restartable():
	case !st.joined[gs]:
		return answer[*rpc.InitReply]{err: st.restarted(gs)}
	case slices.Contains(st.joined, false):
		return answer[*rpc.InitReply]{wait: st.changed}
	}
	r := &rpc.InitReply{Version: st.vs.newest, Epoch: uint64(st.agg.epoch()), Advertise: st.advertise}
	for _, l := range st.layers {
		r.Layers = append(r.Layers, uint32(l))
	}
	return answer[*rpc.InitReply]{v: r}
}

// restarted is the error graph server gs of a run that can restart gets once another graph
// server restarted: its epoch's rows and gradients are gone, so it restarts too and every
// graph server resumes at the same epoch together.
func (st *state) restarted(gs int) error {
	return refused(st.id, codes.Aborted, "another graph server restarted: graph server %d must restart too, so that every graph server resumes at epoch %d together", gs, st.agg.epoch())
}

// restartable reports whether the run's graph servers may restart: in synchronous mode, or
// with checkpoints (st.init set).
func (st *state) restartable() bool { return st.agg.restartable() || st.ckpt != nil }

// setup initialises the shard from the first Init.
func (st *state) setup(req *rpc.InitRequest) error {
	L := len(req.Dims) - 1
	staleness, err := jobconfig.StalenessOf(req.Sync, int(req.Staleness))
	switch {
	case err != nil:
		return fmt.Errorf("staleness %w", err)
	case L < 1:
		return fmt.Errorf("model with %d layer widths", len(req.Dims))
	case req.GraphServer >= req.GraphServers:
		return fmt.Errorf("graph server %d of %d", req.GraphServer, req.GraphServers)
	case req.GraphServers < 1 || req.Contributions < req.GraphServers || req.Contributions%req.GraphServers != 0:
		return fmt.Errorf("%d contributions from %d graph servers: want a whole number of intervals per server", req.Contributions, req.GraphServers)
	case req.GraphServers > MaxGraphServers || req.Contributions > MaxContributions:
		return fmt.Errorf("%d contributions from %d graph servers: want at most %d from at most %d", req.Contributions, req.GraphServers, MaxContributions, MaxGraphServers)
	case L > MaxLayers || req.Heads > MaxHeads || req.OutHeads > MaxHeads:
		return fmt.Errorf("%d layers of %d heads (%d in the output layer): want at most %d layers of at most %d heads", L, req.Heads, req.OutHeads, MaxLayers, MaxHeads)
	case !(req.LearningRate > 0) || !(req.WeightDecay >= 0):
		return fmt.Errorf("learning rate %g, weight decay %g", req.LearningRate, req.WeightDecay)
	}
	st.agg = newAggregation(st.id, staleness, req, st.alloc)
	held, adam, err := st.fresh(req)
	first := 0
	if err == nil && st.ckpt != nil && st.ckpt.Resume {
		first, err = st.restore(req, held, adam)
	}
	if err != nil {
		st.agg, st.layers, st.shapes = nil, nil, nil
		return err
	}
	st.init = req
	st.start(held, adam, first)
	return nil
}

// fresh returns the initial parameters of the held layers, as the seed gives them, with a new
// Adam for them; it sets the held layers and their shapes (st.agg set).
func (st *state) fresh(req *rpc.InitRequest) ([]*tensor.Dense, *model.Adam, error) {
	dims := make([]int, len(req.Dims))
	for i, d := range req.Dims {
		dims[i] = int(d)
	}
	p, err := model.ParametersOf(dims, int(req.Heads), int(req.OutHeads))
	if req.Sage {
		p, err = model.SAGEParametersOf(dims)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := st.fits(p.Shapes); err != nil {
		return nil, nil, err
	}
	n := float32(st.agg.perEpoch())
	all, decay := p.Init(req.Seed), p.Decay(req.WeightDecay/n)
	var held []*tensor.Dense
	adamCfg := model.AdamConfig{LR: req.LearningRate / n, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	st.layers, st.shapes = st.layers[:0], st.shapes[:0]
	for l := st.id; l < len(all); l += st.shards {
		st.layers = append(st.layers, l)
		st.shapes = append(st.shapes, p.Shapes[l])
		held = append(held, all[l])
		adamCfg.WeightDecay = append(adamCfg.WeightDecay, decay[l])
	}
	adam, err := model.NewAdam(adamCfg, held)
	return held, adam, err
}

// fits checks, before they are made, that parameter tensors of the given shapes can be
// served: the shard's share must fit one Pull reply, and every shard's too, since each shard
// generates them all from the seed.
func (st *state) fits(shapes [][2]int) error {
	var held, total uint64
	for i, sh := range shapes {
		b := sum(product(product(uint64(sh[0]), uint64(sh[1])), 4), 64) // the values and a tensor's framing
		total = sum(total, b)
		if i%st.shards == st.id {
			held = sum(held, b)
		}
	}
	if limit := uint64(st.maxMessage); held > limit || total > product(limit, uint64(st.shards)) {
		return fmt.Errorf("a model of %d parameter tensors whose shard %d of %d is %d bytes (all shards: %d): over the message limit of %d bytes per shard",
			len(shapes), st.id, st.shards, held, total, limit)
	}
	return nil
}

// product returns a·b, or the largest uint64 when that overflows.
func product(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// sum returns a+b, or the largest uint64 when that overflows.
func sum(a, b uint64) uint64 {
	v, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return v
}

// alloc returns a new set of buffers shaped like the held layers.
func (st *state) alloc() []*tensor.Dense {
	out := make([]*tensor.Dense, len(st.shapes))
	for i, sh := range st.shapes {
		out[i] = tensor.NewDense(sh[0], sh[1])
	}
	return out
}

// start makes held, with adam's state after epoch, the newest and only version, and forgets
// the Keep reports and the gradients of an unfinished epoch (st.init set). The state the aggregation keeps for undo stays:
// it is of a version at or after epoch, never the one before the new newest.
func (st *state) start(held []*tensor.Dense, adam *model.Adam, epoch int) {
	st.adam, st.saved = adam, epoch
	st.vs = newVersions(int(st.init.GraphServers), uint64(epoch)*st.agg.perEpoch(), held)
	st.agg.reset(epoch)
	st.starts++
	st.forget()
}

// forget drops every graph server's Keep report and join and the gradients of the unfinished
// epoch (st.init set).
func (st *state) forget() {
	st.vs.forget()
	st.joined = make([]bool, st.init.GraphServers)
	st.agg.reset(st.agg.epoch())
	st.notify()
}

// rejoin handles an Init after the first. Every graph server restarts when one does, so an
// Init from a graph server that sent one before starts the run again at the newest epoch
// boundary the shard holds (restart); the graph servers that have not sent Init since are
// told to restart too (restarted, through their Watch streams and Pushes). With RewindTo
// older than that epoch, the shard goes back to the checkpoint of RewindTo.
func (st *state) rejoin(req *rpc.InitRequest) error {
	gs := int(req.GraphServer)
	if gs >= len(st.joined) {
		return fmt.Errorf("graph server %d of %d", gs, len(st.joined))
	}
	if req.RewindTo != nil {
		// The second round of a start: every graph server asks to go back to the epoch all
		// shards can restore; the first one takes the shard there.
		if to := int(*req.RewindTo); to != st.agg.epoch() {
			if err := st.rewind(to); err != nil {
				return err
			}
		}
	} else if st.joined[gs] {
		if err := st.restart(gs); err != nil {
			return err
		}
	}
	st.joined[gs] = true
	st.notify() // wakes the Inits waiting in join and ends the others' Watch streams
	return nil
}

// restart begins a new start after graph server gs restarted: the Keep reports and the
// gradients of the unfinished epoch are dropped; a shard whose weights are not at an epoch
// boundary (asynchronous) goes back to its newest checkpoint. A run that cannot restart
// without checkpoints and has none cannot restart: the gradients of the intervals in flight
// are lost.
func (st *state) restart(gs int) error {
	switch {
	case st.agg.boundary():
		if !st.agg.restartable() && st.ckpt != nil {
			fmt.Fprintf(st.ckpt.Log, "parameter server %d: at the boundary of epoch %d (version %d) as graph server %d restarted: going on from it\n", st.id, st.agg.epoch(), st.vs.newest, gs)
		}
		st.forget()
		return nil
	case st.ckpt == nil:
		// Every later call fails too, so that every graph server ends saying why. Aborted, not
		// FailedPrecondition: the cause is a server's failure, which whoever runs the servers
		// sees and reports (the operator names the pod), not an error of the training.
		st.broken = refused(st.id, codes.Aborted, "graph server %d restarted during an "+
			"asynchronous run without checkpoints, which cannot resume: its intervals' work in flight is lost; give "+
			"the run checkpoints (--checkpoint-dir, spec.checkpoint) to survive restarts", gs)
		st.notify()
		return st.broken
	}
	return st.rewind(st.saved)
}

// ready returns the error every call but Init gets before the shard can serve it.
func (st *state) ready() error {
	if st.broken != nil {
		return st.broken
	}
	if st.init == nil {
		return refused(st.id, codes.FailedPrecondition, "no graph server has sent Init yet")
	}
	return nil
}

// pull answers a Pull with its version, or says to wait until the version exists.
func (st *state) pull(req *rpc.PullRequest) answer[*rpc.PullReply] {
	if err := st.ready(); err != nil {
		return answer[*rpc.PullReply]{err: err}
	}
	st.vs.note(req.GraphServer, req.Keep)
	if st.vs.newest < req.Version {
		return answer[*rpc.PullReply]{wait: st.changed}
	}
	ws, ok := st.vs.at(req.Version)
	if !ok {
		return answer[*rpc.PullReply]{err: refused(st.id, codes.NotFound, "version %d was dropped (newest %d)", req.Version, st.vs.newest)}
	}
	reply := &rpc.PullReply{Version: req.Version}
	for i, w := range ws {
		// No copy: a version never changes once made.
		reply.Layers = append(reply.Layers, &rpc.LayerTensor{Layer: uint32(st.layers[i]), Tensor: rpc.NewTensor(w)})
	}
	return answer[*rpc.PullReply]{v: reply}
}

// push takes a Push's gradients and makes the update they complete; the Push that makes a
// checkpoint due waits for it to be written (landed), the loop does not.
func (st *state) push(req *rpc.PushRequest) answer[*rpc.PushReply] {
	if err := st.ready(); err != nil {
		return answer[*rpc.PushReply]{err: err}
	}
	st.vs.note(req.GraphServer, req.Keep)
	t := req.Task
	if t == nil {
		return answer[*rpc.PushReply]{err: refused(st.id, codes.InvalidArgument, "push without a task")}
	}
	who := fmt.Sprintf("p%d/i%d epoch %d", t.Partition, t.Interval, t.Epoch)
	if len(req.Grads) != len(st.layers) {
		return answer[*rpc.PushReply]{err: refused(st.id, codes.InvalidArgument, "%s pushed %d gradients, the shard holds %d layers", who, len(req.Grads), len(st.layers))}
	}
	if st.restartable() && (int(req.GraphServer) >= len(st.joined) || !st.joined[req.GraphServer]) {
		return answer[*rpc.PushReply]{err: st.restarted(int(req.GraphServer))}
	}
	update, err := st.agg.take(who, t, req.Version, st.vs.newest, func(into []*tensor.Dense) ([]*tensor.Dense, error) {
		return st.decode(who, req.Grads, into)
	})
	if err != nil {
		return answer[*rpc.PushReply]{err: err}
	}
	var landed <-chan saveResult
	if update != nil {
		if err := st.update(update); err != nil {
			// The update counts as made: the shard's versions no longer follow its pushes.
			st.broken = refused(st.id, codes.Internal, "%s: %v", who, err)
			st.notify()
			return answer[*rpc.PushReply]{err: st.broken}
		}
		landed = st.checkpoint(true)
	}
	return answer[*rpc.PushReply]{v: &rpc.PushReply{Version: st.vs.newest, CheckpointEpoch: uint64(st.saved)}, landed: landed}
}

// decode checks a push's gradients and decodes them into into, or, with into nil, returns
// views of the request's data.
func (st *state) decode(who string, grads []*rpc.LayerTensor, into []*tensor.Dense) ([]*tensor.Dense, error) {
	if into == nil {
		into = make([]*tensor.Dense, len(grads))
	}
	for i, g := range grads {
		if g.Layer != uint32(st.layers[i]) {
			return nil, refused(st.id, codes.InvalidArgument, "%s: gradient %d is of layer %d, want %d", who, i, g.Layer, st.layers[i])
		}
		var err error
		if into[i] != nil {
			err = g.Tensor.DecodeInto(into[i])
		} else {
			into[i], err = g.Tensor.View(st.shapes[i][0], st.shapes[i][1])
		}
		if err != nil {
			return nil, refused(st.id, codes.InvalidArgument, "%s: layer %d: %v", who, g.Layer, err)
		}
		if !finite(into[i].Data) {
			return nil, refused(st.id, codes.InvalidArgument, "%s: the gradient of layer %d is not finite (NaN or infinite); lower the learning rate", who, g.Layer)
		}
	}
	return into, nil
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 { // exponent all ones: ±Inf or NaN
			return false
		}
	}
	return true
}

// update makes a new version: the newest weights after one Adam step with grads.
func (st *state) update(grads []*tensor.Dense) error {
	st.agg.stepping(st.vs.newest, st.vs.latest(), st.adam)
	next := st.alloc()
	for i, w := range st.vs.latest() {
		tensor.Copy(next[i], w)
	}
	if err := st.adam.Step(next, grads); err != nil {
		return err
	}
	st.vs.add(next)
	st.notify()
	return nil
}

// watch answers a Watch stream with the newest version and the epoch of the newest
// checkpoint, and the channel to wait on before asking again; in a run that can restart it
// fails with Aborted once another graph server restarted (see restarted).
func (st *state) watch(gs uint32) answer[*rpc.VersionUpdate] {
	if st.broken != nil {
		return answer[*rpc.VersionUpdate]{err: st.broken}
	}
	if st.init != nil && st.restartable() && int(gs) < len(st.joined) && !st.joined[gs] {
		return answer[*rpc.VersionUpdate]{err: st.restarted(int(gs))}
	}
	u := &rpc.VersionUpdate{CheckpointEpoch: uint64(st.saved), Preempt: st.preempt}
	if st.vs != nil {
		u.Version = st.vs.newest
	}
	return answer[*rpc.VersionUpdate]{v: u, wait: st.changed}
}

// notify wakes whoever waits for the state to move.
func (st *state) notify() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// view returns what the shard's accessors and metrics read.
func (st *state) view() answer[view] {
	v := view{saved: uint64(st.saved), layers: slices.Clone(st.layers)}
	if st.vs != nil {
		v.newest, v.held = st.vs.newest, st.vs.list()
	}
	if st.agg != nil {
		v.saved *= st.agg.perEpoch()
	}
	return answer[view]{v: v}
}
