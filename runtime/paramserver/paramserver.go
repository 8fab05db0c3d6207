package paramserver

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// Shard is one parameter-server shard; it implements rpc.ParamServerServer. With
// EnableCheckpoints it saves its weights and Adam state every few epochs and can resume from
// them; a failed checkpoint fails the Push that completed the epoch. One goroutine, its
// loop, owns the shard's state; the calls hand it events and wait for its answers, and a
// checkpoint is written outside it, from a snapshot, so that no call waits for the store
// but the Push whose update the checkpoint holds. Close stops it.
type Shard struct {
	rpc.UnimplementedParamServerServer
	id int

	events chan event
	ctx    context.Context // ends at Close
	stop   context.CancelFunc
	g      errgroup.Group // the loop and the checkpoint writes
	st     *state         // the loop's
	// watching counts the open Watch streams, one per connected graph server; each that ends
	// signals watchEnded.
	watching   atomic.Int32
	watchEnded chan struct{}
}

// Limits on what an Init may describe; they bound what a shard allocates for it.
const (
	MaxGraphServers  = 4096
	MaxContributions = 1 << 24 // 256 graph servers of 65536 intervals, the API's largest job
	MaxLayers        = 1024
	MaxHeads         = 1 << 16
)

// New returns shard id of shards, waiting for Init, with its loop running until Close.
func New(id, shards int) (*Shard, error) {
	if shards < 1 || id < 0 || id >= shards {
		return nil, fmt.Errorf("paramserver: shard %d of %d", id, shards)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Shard{id: id, events: make(chan event), ctx: ctx, stop: stop, watchEnded: make(chan struct{}, 1)}
	store := make(chan struct{}, 1)
	s.st = &state{id: id, shards: shards, ctx: ctx, changed: make(chan struct{}), maxMessage: rpc.MaxMessage, store: store,
		write: func(j *saveJob) {
			s.g.Go(func() error {
				err := writeCheckpoint(ctx, id, store, j)
				_ = s.post(ctx, saveEnded{j, err}) // fails only once the shard closes
				return nil
			})
		}}
	s.g.Go(s.run)
	return s, nil
}

// Close stops the shard: its loop ends, a checkpoint being written is abandoned (call
// SaveCheckpoint first to keep it), calls waiting for it fail with Unavailable. It returns
// when every goroutine of the shard has ended.
func (s *Shard) Close() error {
	s.stop()
	return s.g.Wait()
}

// LimitMessage makes n bytes (at least 1; default rpc.MaxMessage) the largest message the
// shard's server sends: the shard then refuses a model whose held layers would not fit one
// Pull reply, or whose layers would not fit one reply per shard, before it allocates them.
func (s *Shard) LimitMessage(n int) {
	if n > 0 {
		_ = s.post(context.Background(), limitSet{n}) // fails only once the shard closes
	}
}

// Advertise makes addr the address Init's reply tells graph servers to give functions, which
// pull weights from it on the pull data path (default: none, the address they dialed).
func (s *Shard) Advertise(addr string) {
	_ = s.post(context.Background(), advertised{addr}) // fails only once the shard closes
}

// Newest returns the newest version.
func (s *Shard) Newest() uint64 { return s.inspect().newest }

// Versions returns the versions the shard holds, ascending.
func (s *Shard) Versions() []uint64 { return s.inspect().held }

// Layers returns the global indices of the layers the shard holds, once an Init set it up.
func (s *Shard) Layers() []int { return s.inspect().layers }

// inspect returns the shard's view; zero once it is closed.
func (s *Shard) inspect() view {
	return ask(context.Background(), s, func(r chan<- answer[view]) event { return inspected{reply: r} }).v
}

// Init implements rpc.ParamServerServer. A later Init restarts the run at the newest epoch
// boundary (or, with RewindTo, at an older checkpoint) when the graph servers restarted; in
// a run that can restart, Init returns once every graph server has sent it.
func (s *Shard) Init(ctx context.Context, req *rpc.InitRequest) (*rpc.InitReply, error) {
	a := ask(ctx, s, func(r chan<- answer[*rpc.InitReply]) event { return initCalled{req, r} })
	for a.wait != nil {
		if err := s.await(ctx, a.wait); err != nil {
			return nil, err
		}
		a = ask(ctx, s, func(r chan<- answer[*rpc.InitReply]) event { return joinAsked{int(req.GraphServer), r} })
	}
	return a.v, a.err
}

// Pull implements rpc.ParamServerServer: it waits until the version exists.
func (s *Shard) Pull(ctx context.Context, req *rpc.PullRequest) (*rpc.PullReply, error) {
	a := ask(ctx, s, func(r chan<- answer[*rpc.PullReply]) event { return pullAsked{req, r} })
	if a.wait != nil {
		again := proto.Clone(req).(*rpc.PullRequest)
		again.Keep = nil // noted
		for a.wait != nil {
			if err := s.await(ctx, a.wait); err != nil {
				return nil, err
			}
			a = ask(ctx, s, func(r chan<- answer[*rpc.PullReply]) event { return pullAsked{again, r} })
		}
	}
	return a.v, a.err
}

// Push implements rpc.ParamServerServer. The Push whose update completes an epoch a
// checkpoint is due at returns once the checkpoint is written, or fails when it cannot be.
func (s *Shard) Push(ctx context.Context, req *rpc.PushRequest) (*rpc.PushReply, error) {
	a := ask(ctx, s, func(r chan<- answer[*rpc.PushReply]) event { return pushAsked{req, r} })
	if a.err == nil && a.landed != nil {
		epoch, err := s.landing(ctx, a.landed)
		if err != nil {
			return nil, err
		}
		a.v.CheckpointEpoch = uint64(epoch)
	}
	return a.v, a.err
}

// Watch implements rpc.ParamServerServer: it streams the newest version and the epoch of the
// newest checkpoint whenever either moves. In a run that can restart it ends with Aborted once
// another graph server restarted (see restarted).
func (s *Shard) Watch(req *rpc.WatchRequest, stream rpc.ParamServer_WatchServer) error {
	ctx := stream.Context()
	s.watching.Add(1)
	defer func() {
		s.watching.Add(-1)
		select {
		case s.watchEnded <- struct{}{}:
		default: // a signal not yet taken covers this end too
		}
	}()
	var sent *rpc.VersionUpdate
	for {
		a := ask(ctx, s, func(r chan<- answer[*rpc.VersionUpdate]) event { return watchAsked{req.GraphServer, r} })
		if ctx.Err() != nil {
			return nil
		}
		if a.err != nil {
			return a.err
		}
		if sent == nil || !proto.Equal(a.v, sent) {
			if err := stream.Send(a.v); err != nil {
				return err
			}
			sent = a.v
		}
		if s.await(ctx, a.wait) != nil {
			return nil
		}
	}
}

// Preempt tells every graph server, through its Watch stream, that the run is preempted (the
// parameter server got SIGTERM: the graph servers drain to an epoch boundary and exit) and
// returns once no Watch stream is open — every graph server that was connected has exited —
// or with ctx's error when ctx ends first. Serve until it returns, then SaveCheckpoint.
func (s *Shard) Preempt(ctx context.Context) error {
	if err := s.post(ctx, preemptSet{}); err != nil {
		return err
	}
	for s.watching.Load() > 0 {
		select {
		case <-s.watchEnded:
		case <-ctx.Done():
			return fmt.Errorf("parameter server %d: %d graph servers still connected: %w", s.id, s.watching.Load(), ctx.Err())
		}
	}
	return nil
}

// post hands ev to the loop; it fails when ctx ends or the shard closes first.
func (s *Shard) post(ctx context.Context, ev event) error {
	select {
	case s.events <- ev:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-s.ctx.Done():
		return s.closed()
	}
}

// ask hands the loop the event ev makes with a channel for its answer and returns the
// answer, or an error when ctx ends or the shard closes first.
func ask[T any](ctx context.Context, s *Shard, ev func(chan<- answer[T]) event) answer[T] {
	reply := make(chan answer[T], 1)
	if err := s.post(ctx, ev(reply)); err != nil {
		return answer[T]{err: err}
	}
	select {
	case a := <-reply:
		return a
	case <-ctx.Done():
		return answer[T]{err: status.FromContextError(ctx.Err()).Err()}
	case <-s.ctx.Done():
		return answer[T]{err: s.closed()}
	}
}

// await waits until ch is closed, or fails when ctx ends or the shard closes first.
func (s *Shard) await(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-s.ctx.Done():
		return s.closed()
	}
}

// landing waits for the outcome of a checkpoint's write and returns the epoch it holds.
func (s *Shard) landing(ctx context.Context, landed <-chan saveResult) (int, error) {
	select {
	case r := <-landed:
		return r.epoch, r.err
	case <-ctx.Done():
		return 0, status.FromContextError(ctx.Err()).Err()
	case <-s.ctx.Done():
		return 0, s.closed()
	}
}

// closed is the error of a call the shard cannot answer since it closed.
func (s *Shard) closed() error {
	return status.Errorf(codes.Unavailable, "parameter server %d is closed", s.id)
}
