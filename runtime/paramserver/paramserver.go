// Package paramserver is the parameter-server role of the data plane: one shard of the model's
// weights, sharded by layer (layer l lives on shard l mod M; a GAT's parameter tensors — W,
// a_dst, a_src, bias of every layer — count as layers 4l..4l+3), its Adam state, and the weight
// versions graph servers still read (weight stashing: an interval's backward pass uses the
// version its forward pass read).
//
// Every graph server sends Init with the model's shape and optimiser settings; the first one
// initialises the weights (Glorot, from the seed, exactly as pkg/model's single-process trainer
// does) and later ones must agree. Versions count updates: version 0 is the initial weights.
//
// In synchronous mode a shard applies one update per epoch: it waits for the gradients of
// every interval of every graph server (Init's contributions), sums them in the order of
// (partition, interval) and takes one Adam step, so a run equals the single-process trainer up
// to float summation order. In asynchronous mode each pushed gradient is applied as it
// arrives, to the newest weights; since a pushed gradient is an interval's share of the loss
// gradient and Adam normalises step sizes, the learning rate and the weight decay are divided
// by the number of contributions per epoch, so that an epoch's updates move the weights about
// as far as one synchronous step.
//
// A shard keeps the newest version and every version some graph server may still read: its
// Keep report (carried by Pull and Push) lists the versions it pinned and the newest version it
// knows, and it will only ever pin that one or newer. Until every graph server has reported,
// nothing is dropped. A version never changes once made: Pull replies share its buffers, and a
// dropped one is left to the garbage collector.
//
// Restarts (with checkpoints, in either mode): a shard saves its weights and Adam state every
// few epochs at an epoch boundary — in asynchronous mode where the graph servers drain the
// pipeline (pipeline.Config.DrainEvery): every gradient of the epochs before it applied and
// none of a later one — and, restarted, resumes from the newest epoch every shard has a valid
// checkpoint of. Versions count updates in both modes, so the checkpoint of epoch e holds
// version e in synchronous mode and e·contributions in asynchronous mode. Graph servers restart
// together (one lost stops the others): a second Init from a graph server begins a new start,
// the graph servers that have not sent Init since are refused (codes.Aborted) until they
// restart too, and the shard goes on from the newest epoch boundary it holds — in synchronous
// mode its newest version, in asynchronous mode its weights if they are at one, else its
// newest checkpoint. Init's rewind_to takes a shard that kept running back to the epoch
// another resumed from. An asynchronous run without checkpoints cannot resume: a restarted
// graph server ends it. A checkpoint that cannot be written or read breaks the shard: every
// call then fails with codes.DataLoss, since the run cannot go on.
package paramserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Shard is one parameter-server shard; it implements rpc.ParamServerServer. With
// EnableCheckpoints it saves its weights and Adam state every few epochs and can resume from
// them; a failed checkpoint fails the Push that completed the epoch.
type Shard struct {
	rpc.UnimplementedParamServerServer
	id, shards int

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever newest or saved moves
	init     *rpc.InitRequest
	layers   []int                      // global layer index of each held layer
	shapes   [][2]int                   // rows and columns of each held layer
	versions map[uint64][]*tensor.Dense // weights of the held layers per version
	newest   uint64
	adam     *model.Adam
	keep     []keepReport // per graph server
	// synchronous mode: the current epoch's gradients, one set per contribution (slot
	// partition·intervals + interval), made when the slot first pushes
	pending  map[int][]*tensor.Dense
	have     map[int]bool
	received int
	sum      []*tensor.Dense
	joined   []bool // per graph server: sent Init since the run (re)started
	// asynchronous mode: the lowest epoch some contribution has not pushed, and the pushes of
	// that epoch and later ones; none means the weights are at that epoch's boundary
	done   int
	pushes map[int]int
	// undo is the state before the last synchronous step (nil before the first)
	undo *lastStep
	// broken, once a checkpoint failed or a graph server restarted in an asynchronous run
	// without checkpoints, answers every call: the run cannot go on
	broken error
	ckpt   *Checkpointing
	saved  int // the epoch of the newest checkpoint saved or restored (0: none)
	// maxMessage bounds the bytes of the held layers, which one Pull reply carries
	maxMessage int
	advertise  string // the address functions pull from (Init's reply)
}

// Limits on what an Init may describe; they bound what a shard allocates for it.
const (
	MaxGraphServers  = 4096
	MaxContributions = 1 << 24 // 256 graph servers of 65536 intervals, the API's largest job
	MaxLayers        = 1024
	MaxHeads         = 1 << 16
)

type keepReport struct {
	known  bool
	seq    uint64
	pinned []uint64
	newest uint64
}

// New returns shard id of shards, waiting for Init.
func New(id, shards int) (*Shard, error) {
	if shards < 1 || id < 0 || id >= shards {
		return nil, fmt.Errorf("paramserver: shard %d of %d", id, shards)
	}
	return &Shard{id: id, shards: shards, changed: make(chan struct{}), versions: map[uint64][]*tensor.Dense{}, maxMessage: rpc.MaxMessage}, nil
}

// LimitMessage makes n bytes (at least 1; default rpc.MaxMessage) the largest message the
// shard's server sends: the shard then refuses a model whose held layers would not fit one
// Pull reply, or whose layers would not fit one reply per shard, before it allocates them.
func (s *Shard) LimitMessage(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > 0 {
		s.maxMessage = n
	}
}

// Advertise makes addr the address Init's reply tells graph servers to give functions, which
// pull weights from it on the pull data path (default: none, the address they dialed).
func (s *Shard) Advertise(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advertise = addr
}

// Newest returns the newest version.
func (s *Shard) Newest() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newest
}

// Versions returns the versions the shard holds, ascending.
func (s *Shard) Versions() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, 0, len(s.versions))
	for v := range s.versions {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// Init implements rpc.ParamServerServer. A later Init restarts the run at the newest epoch
// boundary (or, with RewindTo, at an older checkpoint) when the graph servers restarted; see
// rejoin.
func (s *Shard) Init(ctx context.Context, req *rpc.InitRequest) (*rpc.InitReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return nil, s.broken
	}
	if s.init != nil {
		a, b := proto.Clone(s.init).(*rpc.InitRequest), proto.Clone(req).(*rpc.InitRequest)
		a.GraphServer, b.GraphServer, b.RewindTo = 0, 0, nil
		if !proto.Equal(a, b) {
			return nil, status.Errorf(codes.InvalidArgument, "parameter server %d: graph server %d describes another run or model (%v) than graph server %d did (%v)",
				s.id, req.GraphServer, b, s.init.GraphServer, a)
		}
		if err := s.rejoin(req); err != nil {
			if s.broken != nil {
				return nil, s.broken
			}
			return nil, status.Errorf(codes.FailedPrecondition, "parameter server %d: %v", s.id, err)
		}
		if err := s.awaitJoined(ctx, int(req.GraphServer)); err != nil {
			return nil, err
		}
		return s.initReply(), nil
	}
	if req.RewindTo != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "parameter server %d: asked to go back to epoch %d before any Init", s.id, *req.RewindTo)
	}
	if err := s.setup(req); err != nil {
		code := codes.InvalidArgument
		if errors.Is(err, errCheckpoints) {
			code = codes.DataLoss
		}
		return nil, status.Errorf(code, "parameter server %d: %v", s.id, err)
	}
	s.joined[req.GraphServer] = true
	s.notify()
	if err := s.awaitJoined(ctx, int(req.GraphServer)); err != nil {
		return nil, err
	}
	return s.initReply(), nil
}

// awaitJoined holds the Init of a run that can restart (s.mu held, released while waiting)
// until every graph server has joined since the run (re)started, so that no graph server
// starts an epoch whose rows a peer that is about to restart would lose. It fails with Aborted
// when another graph server's restart began a new start meanwhile: the caller must restart too.
func (s *Shard) awaitJoined(ctx context.Context, gs int) error {
	for s.restartable() {
		switch {
		case !s.joined[gs]:
			return s.restarted(gs)
		case !slices.Contains(s.joined, false):
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
			s.mu.Lock()
		case <-ctx.Done():
			s.mu.Lock()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return nil
}

// restarted is the error graph server gs of a run that can restart gets once another graph
// server restarted: its epoch's rows and gradients are gone, so it restarts too and every
// graph server resumes at the same epoch together.
func (s *Shard) restarted(gs int) error {
	return status.Errorf(codes.Aborted, "parameter server %d: another graph server restarted: graph server %d must restart too, so that every graph server resumes at epoch %d together", s.id, gs, s.epoch())
}

// restartable reports whether the run's graph servers may restart: in synchronous mode, or
// with checkpoints (s.init set).
func (s *Shard) restartable() bool { return s.init.Sync || s.ckpt != nil }

// perEpoch returns the updates (versions) of one epoch of the run req describes: one in
// synchronous mode, one per contribution in asynchronous mode.
func perEpoch(req *rpc.InitRequest) uint64 {
	if req.Sync {
		return 1
	}
	return uint64(req.Contributions)
}

// epoch returns the lowest epoch whose update is not complete: in synchronous mode the newest
// version, in asynchronous mode the lowest epoch some contribution has not pushed (s.init set).
func (s *Shard) epoch() int {
	if s.init.Sync {
		return int(s.newest)
	}
	return s.done
}

// boundary reports whether the newest version holds the weights after epoch(): every update of
// the earlier epochs and none of a later one (s.init set).
func (s *Shard) boundary() bool { return s.init.Sync || len(s.pushes) == 0 }

func (s *Shard) initReply() *rpc.InitReply {
	r := &rpc.InitReply{Version: s.newest, Epoch: uint64(s.epoch()), Advertise: s.advertise}
	for _, l := range s.layers {
		r.Layers = append(r.Layers, uint32(l))
	}
	return r
}

// setup initialises the shard from the first Init.
func (s *Shard) setup(req *rpc.InitRequest) error {
	L := len(req.Dims) - 1
	switch {
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
	held, adam, err := s.fresh(req)
	first := 0
	if err == nil && s.ckpt != nil && s.ckpt.Resume {
		first, err = s.restore(req, held, adam)
	}
	if err != nil {
		s.layers, s.shapes = nil, nil
		return err
	}
	s.init = req
	s.start(held, adam, first)
	return nil
}

// fresh returns the initial parameters of the held layers, as the seed gives them, with a new
// Adam for them; it sets the held layers and their shapes.
func (s *Shard) fresh(req *rpc.InitRequest) ([]*tensor.Dense, *model.Adam, error) {
	lr, wd := req.LearningRate, req.WeightDecay
	if !req.Sync {
		n := float32(req.Contributions)
		lr, wd = lr/n, wd/n
	}
	all, decay, err := initialParams(req, len(req.Dims)-1, wd, s.fits)
	if err != nil {
		return nil, nil, err
	}
	var held []*tensor.Dense
	adamCfg := model.AdamConfig{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	s.layers, s.shapes = s.layers[:0], s.shapes[:0]
	for l := s.id; l < len(all); l += s.shards {
		s.layers = append(s.layers, l)
		s.shapes = append(s.shapes, [2]int{all[l].Rows, all[l].Cols})
		held = append(held, all[l])
		adamCfg.WeightDecay = append(adamCfg.WeightDecay, decay[l])
	}
	adam, err := model.NewAdam(adamCfg, held)
	return held, adam, err
}

// start makes held, with adam's state after epoch, the newest and only version, and forgets
// the Keep reports and the gradients of an unfinished epoch (s.mu held, s.init set).
func (s *Shard) start(held []*tensor.Dense, adam *model.Adam, epoch int) {
	v := uint64(epoch) * perEpoch(s.init)
	s.adam, s.versions, s.undo = adam, map[uint64][]*tensor.Dense{v: held}, nil
	s.newest, s.saved, s.done, s.pushes = v, epoch, epoch, map[int]int{}
	s.forget()
	s.notify()
}

// forget drops every graph server's Keep report and the gradients of the unfinished epoch
// (s.mu held, s.init set).
func (s *Shard) forget() {
	n := int(s.init.GraphServers)
	s.keep, s.joined = make([]keepReport, n), make([]bool, n)
	if s.init.Sync {
		if s.pending == nil {
			s.pending, s.have = map[int][]*tensor.Dense{}, map[int]bool{}
			s.sum = s.alloc()
		}
		clear(s.have)
		s.received = 0
	}
}

// rejoin handles an Init after the first. Every graph server restarts when one does, so an
// Init from a graph server that sent one before starts the run again at the newest epoch
// boundary the shard holds (restart); the graph servers that have not sent Init since are
// told to restart too (restarted, through their Watch streams and Pushes). With RewindTo
// older than that epoch, the shard goes back to the checkpoint of RewindTo (s.mu held).
func (s *Shard) rejoin(req *rpc.InitRequest) error {
	gs := int(req.GraphServer)
	if gs >= len(s.joined) {
		return fmt.Errorf("graph server %d of %d", gs, len(s.joined))
	}
	if req.RewindTo != nil {
		// The second round of a start: every graph server asks to go back to the epoch all
		// shards can restore; the first one takes the shard there.
		if to := int(*req.RewindTo); to != s.epoch() {
			if err := s.rewind(to); err != nil {
				return err
			}
		}
	} else if s.joined[gs] {
		if err := s.restart(gs); err != nil {
			return err
		}
	}
	s.joined[gs] = true
	s.notify() // wakes the Inits waiting in awaitJoined and ends the others' Watch streams
	return nil
}

// restart begins a new start after graph server gs restarted: the Keep reports and the
// gradients of the unfinished epoch are dropped; an asynchronous shard whose weights are not
// at an epoch boundary goes back to its newest checkpoint. An asynchronous run without
// checkpoints cannot restart: the gradients of the intervals in flight are lost (s.mu held).
func (s *Shard) restart(gs int) error {
	switch {
	case s.boundary():
		if !s.init.Sync && s.ckpt != nil {
			fmt.Fprintf(s.ckpt.Log, "parameter server %d: at the boundary of epoch %d (version %d) as graph server %d restarted: going on from it\n", s.id, s.epoch(), s.newest, gs)
		}
		s.forget()
		return nil
	case s.ckpt == nil:
		// Every later call fails too, so that every graph server ends saying why. Aborted, not
		// FailedPrecondition: the cause is a server's failure, which whoever runs the servers
		// sees and reports (the operator names the pod), not an error of the training.
		s.broken = status.Errorf(codes.Aborted, "parameter server %d: graph server %d restarted during an "+
			"asynchronous run without checkpoints, which cannot resume: its intervals' work in flight is lost; give "+
			"the run checkpoints (--checkpoint-dir, spec.checkpoint) to survive restarts", s.id, gs)
		s.notify()
		return s.broken
	}
	return s.rewind(s.saved)
}

// initialParams returns the model's initial parameter tensors, as pkg/model's single-process
// trainers initialise them from the seed, and the weight decay of each: a GCN's weight
// matrices (decay on the first), or a GAT's W, a_dst, a_src and bias of every layer (decay on
// all).
func initialParams(req *rpc.InitRequest, L int, wd float32, fit func(sizes []uint64) error) ([]*tensor.Dense, []float32, error) {
	if req.Heads > 0 {
		g := model.GATConfig{InDim: int(req.Dims[0]), Heads: int(req.Heads), OutHeads: int(req.OutHeads), Classes: int(req.Dims[L]), Layers: L}
		if L > 1 {
			g.Hidden = int(req.Dims[1]) / g.Heads
		}
		for l := range L {
			if s := g.Shape(l); uint32(s.In) != req.Dims[l] || (l < L-1 && uint32(s.Out) != req.Dims[l+1]) {
				return nil, nil, fmt.Errorf("layer widths %v do not fit a GAT of %d heads: every hidden layer must be heads·hidden wide", req.Dims, g.Heads)
			}
		}
		if err := g.Validate(); err != nil {
			return nil, nil, err
		}
		var sizes []uint64
		for l := range L {
			s := g.Shape(l)
			w := product(uint64(s.Heads), uint64(s.F))
			sizes = append(sizes, product(uint64(s.In), w), w, w, uint64(s.Out))
		}
		if err := fit(sizes); err != nil {
			return nil, nil, err
		}
		all := g.InitParams(req.Seed).Tensors()
		decay := make([]float32, len(all))
		for i := range decay {
			decay[i] = wd
		}
		return all, decay, nil
	}
	cfg := model.GCNConfig{InDim: int(req.Dims[0]), Classes: int(req.Dims[L]), Layers: L}
	if L > 1 {
		cfg.Hidden = int(req.Dims[1])
	}
	for i, d := range cfg.Dims() {
		if uint32(d) != req.Dims[i] {
			return nil, nil, fmt.Errorf("layer widths %v: every hidden layer must have the same width", req.Dims)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	var sizes []uint64
	for l := range L {
		sizes = append(sizes, product(uint64(req.Dims[l]), uint64(req.Dims[l+1])))
	}
	if err := fit(sizes); err != nil {
		return nil, nil, err
	}
	return cfg.InitWeights(req.Seed), model.DefaultAdam(1, wd, L).WeightDecay, nil
}

// fits checks, before they are made, that the parameter tensors of the given numbers of
// values (in initialParams' order) can be served: the shard's share must fit one Pull reply,
// and every shard's too, since each shard generates them all from the seed.
func (s *Shard) fits(sizes []uint64) error {
	var held, total uint64
	for i, n := range sizes {
		b := sum(product(n, 4), 64) // the values and a tensor's framing
		total = sum(total, b)
		if i%s.shards == s.id {
			held = sum(held, b)
		}
	}
	if limit := uint64(s.maxMessage); held > limit || total > product(limit, uint64(s.shards)) {
		return fmt.Errorf("a model of %d parameter tensors whose shard %d of %d is %d bytes (all shards: %d): over the message limit of %d bytes per shard",
			len(sizes), s.id, s.shards, held, total, limit)
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
func (s *Shard) alloc() []*tensor.Dense {
	out := make([]*tensor.Dense, len(s.shapes))
	for i, sh := range s.shapes {
		out[i] = tensor.NewDense(sh[0], sh[1])
	}
	return out
}

func (s *Shard) ready() error {
	if s.broken != nil {
		return s.broken
	}
	if s.init == nil {
		return status.Errorf(codes.FailedPrecondition, "parameter server %d: no graph server has sent Init yet", s.id)
	}
	return nil
}

// Pull implements rpc.ParamServerServer: it waits until the version exists.
func (s *Shard) Pull(ctx context.Context, req *rpc.PullRequest) (*rpc.PullReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(); err != nil {
		return nil, err
	}
	s.noteKeep(req.GraphServer, req.Keep)
	for s.newest < req.Version {
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			s.mu.Lock()
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-ch:
		}
		s.mu.Lock()
	}
	ws, ok := s.versions[req.Version]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "parameter server %d: version %d was dropped (newest %d)", s.id, req.Version, s.newest)
	}
	reply := &rpc.PullReply{Version: req.Version}
	for i, w := range ws {
		// No copy: a version never changes once made.
		t := rpc.NewTensor(w)
		reply.Layers = append(reply.Layers, &rpc.LayerTensor{Layer: uint32(s.layers[i]), Tensor: t})
	}
	return reply, nil
}

// Push implements rpc.ParamServerServer.
func (s *Shard) Push(_ context.Context, req *rpc.PushRequest) (*rpc.PushReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(); err != nil {
		return nil, err
	}
	s.noteKeep(req.GraphServer, req.Keep)
	t := req.Task
	if t == nil {
		return nil, status.Errorf(codes.InvalidArgument, "parameter server %d: push without a task", s.id)
	}
	who := fmt.Sprintf("p%d/i%d epoch %d", t.Partition, t.Interval, t.Epoch)
	if len(req.Grads) != len(s.layers) {
		return nil, status.Errorf(codes.InvalidArgument, "parameter server %d: %s pushed %d gradients, the shard holds %d layers", s.id, who, len(req.Grads), len(s.layers))
	}
	if s.restartable() && (int(req.GraphServer) >= len(s.joined) || !s.joined[req.GraphServer]) {
		return nil, s.restarted(int(req.GraphServer))
	}
	var grads []*tensor.Dense
	if s.init.Sync {
		k := int(s.init.Contributions / s.init.GraphServers)
		slot := int(t.Partition)*k + int(t.Interval)
		switch {
		case int(t.Interval) >= k || slot >= int(s.init.Contributions):
			return nil, status.Errorf(codes.InvalidArgument, "parameter server %d: %s is not one of the %d intervals per server", s.id, who, k)
		case req.Version != s.newest || uint64(t.Epoch) != s.newest:
			return nil, status.Errorf(codes.FailedPrecondition, "parameter server %d: %s pushed gradients of version %d in synchronous mode at version %d", s.id, who, req.Version, s.newest)
		case s.have[slot]:
			return nil, status.Errorf(codes.AlreadyExists, "parameter server %d: %s pushed twice", s.id, who)
		}
		if s.pending[slot] == nil {
			s.pending[slot] = s.alloc()
		}
		grads = s.pending[slot]
	} else {
		if e := int(t.Epoch); e < s.done || s.pushes[e] >= int(s.init.Contributions) {
			return nil, status.Errorf(codes.FailedPrecondition, "parameter server %d: %s pushed gradients of an epoch every contribution has pushed", s.id, who)
		}
		grads = make([]*tensor.Dense, len(s.layers)) // views of the request's data
	}
	for i, g := range req.Grads {
		if g.Layer != uint32(s.layers[i]) {
			return nil, status.Errorf(codes.InvalidArgument, "parameter server %d: %s: gradient %d is of layer %d, want %d", s.id, who, i, g.Layer, s.layers[i])
		}
		var err error
		if s.init.Sync { // kept until every contribution has pushed
			err = g.Tensor.DecodeInto(grads[i])
		} else {
			grads[i], err = g.Tensor.View(s.shapes[i][0], s.shapes[i][1])
		}
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "parameter server %d: %s: layer %d: %v", s.id, who, g.Layer, err)
		}
		if !finite(grads[i].Data) {
			return nil, status.Errorf(codes.InvalidArgument, "parameter server %d: %s: the gradient of layer %d is not finite (NaN or infinite); lower the learning rate", s.id, who, g.Layer)
		}
	}
	if s.init.Sync {
		slot := int(t.Partition)*int(s.init.Contributions/s.init.GraphServers) + int(t.Interval)
		s.have[slot] = true
		s.received++
		if s.received < int(s.init.Contributions) {
			return &rpc.PushReply{Version: s.newest, CheckpointEpoch: uint64(s.saved)}, nil
		}
		for i := range s.sum {
			s.sum[i].Zero()
			for slot := range int(s.init.Contributions) {
				tensor.AddInPlace(s.sum[i], s.pending[slot][i])
			}
		}
		clear(s.have)
		s.received = 0
		grads = s.sum
	}
	if err := s.step(grads); err != nil {
		return nil, status.Errorf(codes.Internal, "parameter server %d: %s: %v", s.id, who, err)
	}
	if !s.init.Sync {
		s.count(int(t.Epoch))
	}
	if err := s.checkpointIfDue(); err != nil {
		return nil, s.broken
	}
	return &rpc.PushReply{Version: s.newest, CheckpointEpoch: uint64(s.saved)}, nil
}

// count records an asynchronous push of epoch e and moves past the epochs every contribution
// has pushed.
func (s *Shard) count(e int) {
	s.pushes[e]++
	for n := int(s.init.Contributions); s.pushes[s.done] == n; s.done++ {
		delete(s.pushes, s.done)
	}
}

// checkpointIfDue saves a checkpoint when the weights are at the boundary of an epoch it is
// due at; a failed save breaks the shard.
func (s *Shard) checkpointIfDue() error {
	if s.ckpt == nil || !s.boundary() || s.epoch()%s.ckpt.Every != 0 {
		return nil
	}
	if err := s.save(context.Background()); err != nil {
		s.broken = status.Error(codes.DataLoss, err.Error())
		s.notify()
		return err
	}
	return nil
}

// step makes a new version: the newest weights after one Adam step with grads.
func (s *Shard) step(grads []*tensor.Dense) error {
	if s.init.Sync {
		s.keepUndo()
	}
	next := s.alloc()
	for i, w := range s.versions[s.newest] {
		tensor.Copy(next[i], w)
	}
	if err := s.adam.Step(next, grads); err != nil {
		return err
	}
	s.newest++
	s.versions[s.newest] = next
	s.notify()
	s.collect()
	return nil
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 { // exponent all ones: ±Inf or NaN
			return false
		}
	}
	return true
}

// noteKeep records a graph server's Keep report, if newer than its last, and drops versions.
func (s *Shard) noteKeep(gs uint32, k *rpc.Keep) {
	if k == nil || int(gs) >= len(s.keep) {
		return
	}
	r := &s.keep[gs]
	if r.known && k.Seq <= r.seq {
		return
	}
	*r = keepReport{known: true, seq: k.Seq, pinned: append(r.pinned[:0], k.Pinned...), newest: k.Newest}
	s.collect()
}

// collect drops every version no graph server may read any more.
func (s *Shard) collect() {
	for _, r := range s.keep {
		if !r.known {
			return
		}
	}
	for v := range s.versions {
		if v == s.newest || s.needed(v) {
			continue
		}
		delete(s.versions, v)
	}
}

func (s *Shard) needed(v uint64) bool {
	for _, r := range s.keep {
		if v >= r.newest || slices.Contains(r.pinned, v) {
			return true
		}
	}
	return false
}

// notify wakes the watchers (s.mu held).
func (s *Shard) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Watch implements rpc.ParamServerServer: it streams the newest version and the epoch of the
// newest checkpoint whenever either moves. In a run that can restart it ends with Aborted once
// another graph server restarted (see restarted).
func (s *Shard) Watch(req *rpc.WatchRequest, stream rpc.ParamServer_WatchServer) error {
	ctx := stream.Context()
	var sent *rpc.VersionUpdate
	for {
		s.mu.Lock()
		u, ch, broken := &rpc.VersionUpdate{Version: s.newest, CheckpointEpoch: uint64(s.saved)}, s.changed, s.broken
		if broken == nil && s.init != nil && s.restartable() && int(req.GraphServer) < len(s.joined) && !s.joined[req.GraphServer] {
			broken = s.restarted(int(req.GraphServer))
		}
		s.mu.Unlock()
		if broken != nil {
			return broken
		}
		if sent == nil || !proto.Equal(u, sent) {
			if err := stream.Send(u); err != nil {
				return err
			}
			sent = u
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// lastStep is a synchronous shard's weights and Adam state before its last step. A graph
// server killed between its pushes to two shards leaves one shard an epoch ahead of the
// other; with it, that shard goes back one epoch without a checkpoint.
type lastStep struct {
	version uint64
	state   map[string][]float32 // as model.Adam.Snapshot, copied
	steps   int
}

// keepUndo copies the newest version and the Adam state into s.undo (s.mu held).
func (s *Shard) keepUndo() {
	st, steps := s.adam.Snapshot(s.versions[s.newest])
	if s.undo == nil {
		s.undo = &lastStep{state: make(map[string][]float32, len(st))}
	}
	for k, v := range st {
		s.undo.state[k] = append(s.undo.state[k][:0], v...)
	}
	s.undo.version, s.undo.steps = s.newest, steps
}
