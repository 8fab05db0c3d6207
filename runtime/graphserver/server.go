// Package graphserver is the graph-server role of the data plane (DESIGN.md sections 1, 4, 5):
// it holds one partition and its ghost buffers, runs the graph-parallel tasks (GA, SC and their
// backward passes) with pkg/tensor, exchanges ghost rows with its peers over gRPC, hands the
// tensor tasks (AV, ∇AV) to a pkg/dispatch backend, computes the loss on the logits itself,
// pulls weights from and pushes gradients to the parameter servers, and drives its intervals
// through a pkg/pipeline Scheduler. Graph server 0 also coordinates: it sums the epochs' losses, runs evaluation
// passes, stops at the target accuracy or the epoch count, and writes the run's progress as
// JSON lines and, given a ProgressReporter (Config.Status), into the GNNTrainingJob's status.
//
// # Buffers
//
// P_l (owned rows, then ghost rows) and dZ_l (owned rows) are kept in R slots, epoch e in slot
// e mod R, so that a Gather can read each source interval at the epoch the scheduler names
// (Started.Reads) while its producer already writes a newer one: R = 1 in synchronous mode,
// 2S+2 with staleness S (a reader at epoch e reads no older than e-S-1, and no interval runs
// past e+S meanwhile). The backward pass uses the symmetry of Â: ∇GA_l of an interval computes
// only the contributions of its rows to ghost rows (its transposed ghost block times its dZ_l
// rows), which ∇SC_l pushes to their owners; the owned part of Âᵀ dZ_l is gathered by ∇AV_l
// from the versioned dZ_l rows of the local intervals, and the owners add the pushed
// contributions, each as of the epoch the scheduler names.
//
// A GAT (Config.Heads > 0) runs through the same steps, with its edge tasks inside GA and ∇GA
// (gat.go).
//
// # Evaluation
//
// The coordinator asks every graph server for an evaluation pass (no dropout) at a weight
// version after an epoch (every EvalEvery epochs and after the last); it runs beside training
// with its own buffers and a layer-by-layer exchange, and yields the validation accuracy of the
// learning curve and the final accuracies.
package graphserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Config is what one graph server needs.
type Config struct {
	Partition, Partitions int
	Intervals             int                  // per graph server (every server must use the same number)
	Data                  *graph.PartitionData // this server's partition (graph.ReadPartitionFile)
	Peers                 []string             // address of the graph server of every partition (own included)
	ParamServers          []string             // address of every parameter-server shard
	Run                   string               // the run's identity, shared by all its servers

	Layers, Hidden int
	// Heads > 0 trains a GAT (pkg/model): Heads attention heads of Hidden features in every
	// hidden layer, OutHeads in the output layer, dropout AttentionDropout on the attention
	// coefficients. Heads == 0 trains a GCN.
	Heads, OutHeads  int
	AttentionDropout float64
	Dropout          float64
	LearningRate     float64
	WeightDecay      float64
	Epochs           int
	Seed             uint64
	Sync             bool
	Staleness        int
	TargetAccuracy   float64 // stop once the validation accuracy reaches it (0: never)
	EvalEvery        int     // evaluate every this many epochs, and after the last
	// Patience > 0 selects by validation as the GAT paper does (model.BestValidation, with
	// EvalEvery 1): the result is the evaluation of the kept epoch, and the run stops after
	// Patience evaluations without progress.
	Patience int

	Backend dispatch.Backend
	// Pull, when set, selects the pull data path: the server serves it (the inputs of its
	// tasks in flight) beside its own service, and its GCN tensor tasks name their weight by
	// version and parameter server (the backend must be built with the same store).
	Pull rpc.TaskSourceServer
	// Events receives the coordinator's progress as JSON lines (graph server 0 only).
	Events io.Writer
	// Startup bounds the wait for peers to come up.
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
}

func (c *Config) validate() error {
	switch {
	case c.Partitions < 1 || c.Partition < 0 || c.Partition >= c.Partitions:
		return fmt.Errorf("partition %d of %d", c.Partition, c.Partitions)
	case len(c.Peers) != c.Partitions:
		return fmt.Errorf("%d peer addresses for %d partitions", len(c.Peers), c.Partitions)
	case len(c.ParamServers) < 1:
		return errors.New("no parameter server addresses")
	case c.Intervals < 1:
		return fmt.Errorf("%d intervals", c.Intervals)
	case c.Epochs < 1:
		return fmt.Errorf("%d epochs", c.Epochs)
	case c.Sync && c.Staleness != 0:
		return errors.New("staleness given with synchronous mode")
	case c.Staleness < 0:
		return fmt.Errorf("staleness %d", c.Staleness)
	case c.EvalEvery < 1:
		return fmt.Errorf("evaluation every %d epochs", c.EvalEvery)
	case c.Patience < 0 || (c.Patience > 0 && c.EvalEvery != 1):
		return fmt.Errorf("patience %d with evaluation every %d epochs: selection by validation evaluates every epoch", c.Patience, c.EvalEvery)
	case c.Backend == nil:
		return errors.New("no tensor backend")
	case c.Heads < 0 || (c.Heads > 0 && c.OutHeads < 1):
		return fmt.Errorf("GAT with %d heads and %d output heads", c.Heads, c.OutHeads)
	}
	return nil
}

// server is one graph server.
type server struct {
	rpc.UnimplementedGraphServerServer
	cfg   Config
	part  *partition.Part
	ivs   []interval
	model model.GCNConfig // a GAT's: only Layers is set
	gat   *gatModel       // nil for a GCN
	dims  []int           // widths of the input and of P_l (a GAT's: heads·features) of every layer
	slots int             // R
	// overlap: the scheduler runs an interval's backward pass of epoch e beside its forward
	// pass of epoch e+1 (pipeline.Config.TailOverlap; a GCN in asynchronous mode with S ≥ 1), so
	// Z_l and dW_l are kept per epoch parity and the backward pass has its own activations
	overlap bool

	p  [][]*tensor.Dense // [layer][slot]: P_l, owned then ghost rows
	z  [][]*tensor.Dense // [epoch parity, with overlap][layer]: Z_l, owned rows
	dz [][]*tensor.Dense // [layer][slot]: dZ_l, owned rows
	// contrib[layer][remote interval][slot]: gradient contributions pushed by a remote
	// interval to this server's rows
	contrib [][][]contribution
	// seg[global interval]: for a remote interval, the range of this server's ghost block of
	// its partition that its Scatter fills (set by its first batch)
	seg      [][2]int
	segKnown []atomic.Bool
	compP    []*bufPool // [layer]: composite P_l buffers of mixed-epoch Gathers
	compDZ   []*bufPool // [layer]: composite dZ_l buffers of mixed-epoch backward Gathers

	peers  []*peer
	shards []*shard

	events chan func()
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Owned by the driver goroutine.
	sched     *pipeline.Scheduler
	epochLoss map[int]float64
	epochWU   map[int]int
	evalPins  map[uint64]int
	coord     *coordinator

	weights   weightCache
	keep      atomic.Pointer[rpc.Keep]
	keepSeq   uint64
	bytesSent atomic.Uint64
	eval      *evaluator
}

// interval is one interval's state and buffers, reused across epochs.
type interval struct {
	*partition.Interval
	feats  graph.Features
	labels []int32
	train  []int32 // training rows, relative to the interval
	act    []model.Activation
	dp     []*tensor.Dense   // [layer]: dP_l of the rows
	dw     [][]*tensor.Dense // [epoch parity, with overlap][layer]: dW_l of the epoch, until WU
	// backAct[l] is ∇AV_l's activation buffer with overlap (the next epoch's AV_l uses act[l])
	backAct []model.Activation
	ghostC  []*tensor.Dense   // [layer]: contributions to the touched ghosts
	zView   [][]*tensor.Dense // [epoch parity, with overlap][layer]: rows of z
	pView   [][]*tensor.Dense // [layer][slot]: rows of p
	dzView  [][]*tensor.Dense // [layer][slot]: rows of dz
	send    [][]float32       // [peer]: gather buffer of Scatter rows
}

// contribution is one remote interval's pushed gradient rows of one epoch.
type contribution struct {
	rows []int32 // local owned rows, ascending
	data *tensor.Dense
}

// Run loads the partition, serves on lis, connects to the peers and parameter servers, trains,
// and keeps serving (evaluations, late requests) until ctx ends or the run fails. It returns
// nil after a clean shutdown and the first error otherwise.
func Run(ctx context.Context, cfg Config, lis net.Listener) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("graph server %d: %w", cfg.Partition, err)
	}
	if cfg.Startup == 0 {
		cfg.Startup = 2 * time.Minute
	}
	s, err := newServer(cfg)
	if err != nil {
		return fmt.Errorf("graph server %d: %w", cfg.Partition, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.ctx, s.cancel = ctx, cancel
	srv, h := rpc.NewServer()
	rpc.RegisterGraphServerServer(srv, s)
	if cfg.Pull != nil {
		rpc.RegisterTaskSourceServer(srv, cfg.Pull)
	}
	served := make(chan error, 1)
	go func() { served <- rpc.Serve(ctx, lis, srv, h) }()
	err = s.run(ctx)
	cancel(err)
	if serr := <-served; err == nil {
		err = serr
	}
	s.close()
	if s.coord != nil && s.coord.status != nil {
		s.coord.fatal(err)
		flush := cfg.StatusFlush
		if flush <= 0 {
			flush = DefaultStatusFlush
		}
		s.coord.status.close(flush)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("graph server %d: %w", cfg.Partition, err)
	}
	return nil
}

// newServer loads the partition and allocates every buffer.
func newServer(cfg Config) (*server, error) {
	d := cfg.Data
	if d == nil || d.Part != cfg.Partition || d.Parts != cfg.Partitions {
		return nil, fmt.Errorf("no data of partition %d of %d", cfg.Partition, cfg.Partitions)
	}
	if err := requireFeatures(d); err != nil {
		return nil, err
	}
	if d.Features.Sparse != nil {
		graph.RowNormalize(d.Features.Sparse)
	}
	part, err := partition.Build(d)
	if err != nil {
		return nil, err
	}
	cuts, err := part.Cut(cfg.Intervals)
	if err != nil {
		return nil, err
	}
	s := &server{
		cfg: cfg, part: part, slots: 1,
		events: make(chan func(), 1024), epochLoss: map[int]float64{}, epochWU: map[int]int{}, evalPins: map[uint64]int{},
	}
	if cfg.Heads > 0 {
		g := model.GATConfig{InDim: d.Features.Cols(), Hidden: cfg.Hidden, Heads: cfg.Heads, OutHeads: cfg.OutHeads, Classes: d.NumClasses,
			Layers: cfg.Layers, Dropout: float32(cfg.Dropout), AttentionDropout: float32(cfg.AttentionDropout)}
		if err := g.Validate(); err != nil {
			return nil, err
		}
		s.model = model.GCNConfig{Layers: g.Layers}
		s.dims = []int{g.InDim}
		for l := range g.Layers {
			s.dims = append(s.dims, g.Shape(l).Width())
		}
		s.gat = &gatModel{cfg: g}
	} else {
		m := model.GCNConfig{InDim: d.Features.Cols(), Hidden: cfg.Hidden, Classes: d.NumClasses, Layers: cfg.Layers, Dropout: float32(cfg.Dropout)}
		if err := m.Validate(); err != nil {
			return nil, err
		}
		s.model, s.dims = m, m.Dims()
	}
	if !cfg.Sync {
		s.slots = 2*cfg.Staleness + 2
	}
	s.overlap = EpochsInFlight(cfg.Sync, cfg.Staleness, cfg.Heads) > 1
	s.allocate(cuts)
	if s.gat != nil {
		s.gat.allocate(s)
	}
	s.weights.byVersion = map[int]*weightSet{}
	s.keep.Store(&rpc.Keep{})
	if cfg.Partition == 0 {
		s.coord = newCoordinator(s)
	}
	s.eval = newEvaluator(s)
	return s, nil
}

func requireFeatures(d *graph.PartitionData) error {
	if d.Features.Present() {
		return nil
	}
	return fmt.Errorf("dataset %s: %w", d.Meta.Name, graph.ErrNoFeatures)
}

// allocate sets up the intervals and the buffers of every layer.
func (s *server) allocate(cuts []partition.Interval) {
	L, R, n := s.model.Layers, s.slots, s.part.Owned
	rows := n + len(s.part.Ghosts)
	s.p, s.dz, s.z = make([][]*tensor.Dense, L), make([][]*tensor.Dense, L), make([][]*tensor.Dense, 1+btoi(s.overlap))
	for l := range L {
		d := s.dims[l+1]
		for p := range s.z {
			s.z[p] = append(s.z[p], tensor.NewDense(n, d))
		}
		for range R {
			s.p[l] = append(s.p[l], tensor.NewDense(rows, d))
			s.dz[l] = append(s.dz[l], tensor.NewDense(n, d))
		}
		s.compP = append(s.compP, &bufPool{rows: rows, cols: d})
		s.compDZ = append(s.compDZ, &bufPool{rows: n, cols: d})
	}
	total := s.cfg.Partitions * s.cfg.Intervals
	s.seg = make([][2]int, total)
	s.segKnown = make([]atomic.Bool, total)
	s.contrib = make([][][]contribution, L)
	for l := range L {
		s.contrib[l] = make([][]contribution, total)
		for g := range total {
			if g/s.cfg.Intervals != s.cfg.Partition {
				s.contrib[l][g] = make([]contribution, R)
			}
		}
	}
	dmax := 0
	for l := range L {
		dmax = max(dmax, s.rowWidth(l))
	}
	for i := range cuts {
		c := &cuts[i]
		iv := interval{Interval: c, feats: partition.FeatureRows(s.part.Features, c.Lo, c.Hi), labels: s.part.Labels[c.Lo:c.Hi]}
		for _, r := range s.part.Splits[0] {
			if int(r) >= c.Lo && int(r) < c.Hi {
				iv.train = append(iv.train, r-int32(c.Lo))
			}
		}
		iv.act = make([]model.Activation, L)
		if s.overlap {
			iv.backAct = make([]model.Activation, L)
		}
		if s.gat == nil {
			iv.dw = make([][]*tensor.Dense, len(s.z))
		}
		iv.zView = make([][]*tensor.Dense, len(s.z))
		for l := range L {
			d := s.dims[l+1]
			iv.dp = append(iv.dp, tensor.NewDense(c.Rows(), d))
			for p := range iv.dw {
				iv.dw[p] = append(iv.dw[p], tensor.NewDense(s.dims[l], d))
			}
			iv.ghostC = append(iv.ghostC, tensor.NewDense(c.GhostT.Rows, s.rowWidth(l)))
			for p := range s.z {
				iv.zView[p] = append(iv.zView[p], s.z[p][l].RowSlice(c.Lo, c.Hi))
			}
			var pv, dzv []*tensor.Dense
			for r := range R {
				pv = append(pv, s.p[l][r].RowSlice(c.Lo, c.Hi))
				dzv = append(dzv, s.dz[l][r].RowSlice(c.Lo, c.Hi))
			}
			iv.pView, iv.dzView = append(iv.pView, pv), append(iv.dzView, dzv)
		}
		iv.send = make([][]float32, s.cfg.Partitions)
		for q, rg := range c.Send {
			iv.send[q] = make([]float32, (rg[1]-rg[0])*dmax)
		}
		s.ivs = append(s.ivs, iv)
	}
}

// rowWidth returns the width of the rows of layer l that Scatter and ∇SC exchange: P_l and its
// gradient, and for a GAT the source scores s_src and their gradient after them.
func (s *server) rowWidth(l int) int {
	if s.gat != nil {
		return s.dims[l+1] + s.gat.cfg.Shape(l).Heads
	}
	return s.dims[l+1]
}

// EpochsInFlight returns how many epochs of one interval a graph server runs at once: 2 when
// the backward pass of an epoch overlaps the next forward pass (pipeline.Config.TailOverlap: a
// GCN, heads == 0, in asynchronous mode with staleness ≥ 1), so that an interval may have two
// tensor tasks in flight; otherwise 1.
func EpochsInFlight(sync bool, staleness, heads int) int {
	if !sync && staleness > 0 && heads == 0 {
		return 2
	}
	return 1
}

// run connects, trains and serves until ctx ends.
func (s *server) run(ctx context.Context) error {
	if err := s.connect(ctx); err != nil {
		return err
	}
	first, err := s.firstEpoch()
	if err != nil {
		return err
	}
	sc, err := pipeline.New(pipeline.Config{
		Partitions: s.cfg.Partitions, Intervals: s.cfg.Intervals, Layers: s.model.Layers, Epochs: s.cfg.Epochs,
		FirstEpoch: first, Sync: s.cfg.Sync, Staleness: s.cfg.Staleness, Gradients: pipeline.PushGradients,
		Local: []int{s.cfg.Partition}, ExternalVersions: true, TailOverlap: s.overlap,
	})
	if err != nil {
		return err
	}
	s.sched = sc
	if s.coord != nil {
		s.coord.next, s.coord.progress.Epoch = first, first
	}
	return s.drive(ctx)
}

// firstEpoch returns the epoch to start at: 0, or in synchronous mode the epoch of the
// checkpoint the parameter servers resumed from (their version at Init; all must agree). In
// asynchronous mode other graph servers may have pushed before this one's Init, and parameter
// servers take no checkpoints.
func (s *server) firstEpoch() (int, error) {
	if !s.cfg.Sync {
		return 0, nil
	}
	var first *shard
	for _, sh := range s.shards {
		switch {
		case len(sh.layers) == 0: // holds nothing, never moves
		case first == nil:
			first = sh
		case sh.version != first.version:
			return 0, fmt.Errorf("the parameter servers start at different versions (%s at %d, %s at %d): they resumed from checkpoints of different epochs", first.name, first.version, sh.name, sh.version)
		}
	}
	v := first.version // initShards checked that every layer is held
	if v >= s.cfg.Epochs {
		return 0, fmt.Errorf("the parameter servers resumed from the checkpoint of epoch %d: the run of %d epochs is already done", v, s.cfg.Epochs)
	}
	return v, nil
}

// do hands f to the driver goroutine, which runs every change of scheduler state.
func (s *server) do(f func()) {
	select {
	case s.events <- f:
	case <-s.ctx.Done():
	}
}

// fail ends the run with err (the first error wins).
func (s *server) fail(err error) { s.cancel(err) }

// drive is the driver loop: it starts every ready task, applies events, and never blocks on I/O.
func (s *server) drive(ctx context.Context) error {
	if s.coord != nil {
		s.coord.start = time.Now()
	}
	var ready []pipeline.Task
	for {
		ready = s.sched.AppendReady(ready[:0])
		for _, t := range ready {
			st, err := s.sched.Start(t)
			if err != nil {
				return err
			}
			if t.Kind == pipeline.KindAV && t.Layer == 0 {
				s.updateKeep()
			}
			go s.exec(ctx, st)
		}
		select {
		case f := <-s.events:
			f()
		case <-ctx.Done():
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return nil
		}
	}
}

// exec runs one task and reports its completion to the driver.
func (s *server) exec(ctx context.Context, st pipeline.Started) {
	loss, err := s.runTask(ctx, st)
	if err != nil {
		if ctx.Err() == nil {
			s.fail(fmt.Errorf("%v: %w", st.Task, err))
		}
		return
	}
	s.do(func() { s.taskDone(st.Task, loss) })
}

// taskDone records a finished task in the scheduler and does what follows it.
func (s *server) taskDone(t pipeline.Task, loss float64) {
	if err := s.sched.Done(t); err != nil {
		s.fail(err)
		return
	}
	switch {
	case t.Kind == pipeline.KindAV && t.Layer == s.model.Layers:
		s.epochLoss[t.Epoch] += loss
	case t.Kind == pipeline.KindWU:
		s.updateKeep()
		s.weights.release(s.keep.Load())
		go s.broadcastProgress(t)
		s.epochWU[t.Epoch]++
		if s.epochWU[t.Epoch] == s.cfg.Intervals {
			rep := &rpc.EpochReport{From: uint32(s.cfg.Partition), Epoch: uint32(t.Epoch), Loss: s.epochLoss[t.Epoch], BytesSent: s.bytesSent.Swap(0)}
			delete(s.epochLoss, t.Epoch)
			delete(s.epochWU, t.Epoch)
			go s.reportEpoch(rep)
		}
	}
}

// updateKeep publishes a new Keep report: the pinned versions and the newest known.
func (s *server) updateKeep() {
	s.keepSeq++
	k := &rpc.Keep{Seq: s.keepSeq, Newest: uint64(s.sched.WeightVersion())}
	for _, v := range s.sched.PinnedVersions() {
		k.Pinned = append(k.Pinned, uint64(v))
	}
	for v := range s.evalPins {
		k.Pinned = append(k.Pinned, v)
	}
	s.keep.Store(k)
}

// setVersion records that every shard has reached version v.
func (s *server) setVersion(v int) {
	if v <= s.sched.WeightVersion() {
		return
	}
	if err := s.sched.SetWeightVersion(v); err != nil {
		s.fail(err)
		return
	}
	s.updateKeep()
	s.weightSetOf(v)
}

func (s *server) close() {
	for _, p := range s.peers {
		if p != nil && p.conn != nil {
			p.conn.Close()
		}
	}
	for _, sh := range s.shards {
		if sh.conn != nil {
			sh.conn.Close()
		}
	}
}

// peer is a connection to another graph server.
type peer struct {
	name   string
	conn   *grpc.ClientConn
	client rpc.GraphServerClient
}

// dwOf returns an interval's dW_l buffers of epoch e.
func (iv *interval) dwOf(e int) []*tensor.Dense { return iv.dw[e%len(iv.dw)] }

// zOf returns the views of an interval's Z_l rows of epoch e.
func (iv *interval) zOf(e int) []*tensor.Dense { return iv.zView[e%len(iv.zView)] }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// global returns the global index of interval i of partition p.
func (s *server) global(p, i int) int { return p*s.cfg.Intervals + i }

// bufPool keeps buffers of one shape for reuse.
type bufPool struct {
	mu         sync.Mutex
	rows, cols int
	free       []*tensor.Dense
}

func (b *bufPool) get() *tensor.Dense {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.free); n > 0 {
		d := b.free[n-1]
		b.free = b.free[:n-1]
		return d
	}
	return tensor.NewDense(b.rows, b.cols)
}

func (b *bufPool) put(d *tensor.Dense) {
	b.mu.Lock()
	b.free = append(b.free, d)
	b.mu.Unlock()
}
