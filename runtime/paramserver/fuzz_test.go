package paramserver

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/internal/hostile"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// The methods a fuzzed script calls, by the first byte of each call.
const (
	callInit = iota
	callPull
	callPush
	callWatch
	methods
)

// fuzzLimit is the fuzzed server's message limit; fuzzCalls the most calls of one script.
const (
	fuzzLimit = 128 << 10
	fuzzCalls = 12
)

// request returns an empty request of method m.
func request(m byte) proto.Message {
	switch m {
	case callInit:
		return &rpc.InitRequest{}
	case callPull:
		return &rpc.PullRequest{}
	case callPush:
		return &rpc.PushRequest{}
	}
	return &rpc.WatchRequest{}
}

// current serves the shard of the script being run: each script starts from a fresh one on
// the same server.
type current struct {
	rpc.UnimplementedParamServerServer
	s atomic.Pointer[Shard]
}

func (c *current) Init(ctx context.Context, r *rpc.InitRequest) (*rpc.InitReply, error) {
	return c.s.Load().Init(ctx, r)
}
func (c *current) Pull(ctx context.Context, r *rpc.PullRequest) (*rpc.PullReply, error) {
	return c.s.Load().Pull(ctx, r)
}
func (c *current) Push(ctx context.Context, r *rpc.PushRequest) (*rpc.PushReply, error) {
	return c.s.Load().Push(ctx, r)
}
func (c *current) Watch(r *rpc.WatchRequest, st rpc.ParamServer_WatchServer) error {
	return c.s.Load().Watch(r, st)
}

// fuzzSeeds returns scripts of runs that train: a synchronous GCN epoch, asynchronous pushes,
// a GAT, a restart that rewinds, and hostile Inits that once allocated what they declared.
func fuzzSeeds() [][]byte {
	grad := func(r, c int) *rpc.Tensor { return rpc.NewTensor(tensor.NewDense(r, c)) }
	gcn := func(sync bool) *rpc.InitRequest {
		return &rpc.InitRequest{Dims: []uint32{6, 4, 3}, Seed: 7, LearningRate: 0.01, Sync: sync, Contributions: 2, GraphServers: 1, Run: "fuzz"}
	}
	pushReq := func(i, epoch uint32, version uint64) *rpc.PushRequest {
		// shard 0 of 2 holds layer 0 (6×4)
		return &rpc.PushRequest{Task: &rpc.TaskRef{Interval: i, Epoch: epoch}, Version: version,
			Grads: []*rpc.LayerTensor{{Layer: 0, Tensor: grad(6, 4)}}, Keep: &rpc.Keep{Seq: uint64(i + 1), Newest: version}}
	}
	zero := uint64(0)
	rewind := gcn(true)
	rewind.RewindTo = &zero
	gat := &rpc.InitRequest{Dims: []uint32{5, 8, 3}, Heads: 4, OutHeads: 1, Seed: 1, LearningRate: 0.005, Sync: true, Contributions: 1, GraphServers: 1}
	return [][]byte{
		hostile.Script(hostile.Call{Method: callInit, Msg: gcn(true)}, hostile.Call{Method: callPull, Msg: &rpc.PullRequest{}}, hostile.Call{Method: callPush, Msg: pushReq(0, 0, 0)},
			hostile.Call{Method: callPush, Msg: pushReq(1, 0, 0)}, hostile.Call{Method: callPull, Msg: &rpc.PullRequest{Version: 1}}, hostile.Call{Method: callWatch, Msg: &rpc.WatchRequest{}}),
		hostile.Script(hostile.Call{Method: callInit, Msg: gcn(false)}, hostile.Call{Method: callPush, Msg: pushReq(0, 0, 0)}, hostile.Call{Method: callPush, Msg: pushReq(1, 0, 1)}, hostile.Call{Method: callPull, Msg: &rpc.PullRequest{Version: 2}}),
		hostile.Script(hostile.Call{Method: callInit, Msg: gat}, hostile.Call{Method: callPull, Msg: &rpc.PullRequest{}}),
		hostile.Script(hostile.Call{Method: callInit, Msg: gcn(true)}, hostile.Call{Method: callPush, Msg: pushReq(0, 0, 0)}, hostile.Call{Method: callPush, Msg: pushReq(1, 0, 0)}, hostile.Call{Method: callInit, Msg: gcn(true)}, hostile.Call{Method: callInit, Msg: rewind}),
		hostile.Script(hostile.Call{Method: callInit, Msg: &rpc.InitRequest{Dims: []uint32{1 << 31, 1 << 31}, LearningRate: 1, Contributions: 1, GraphServers: 1}}),
		hostile.Script(hostile.Call{Method: callInit, Msg: &rpc.InitRequest{Dims: []uint32{3, 2}, LearningRate: 1, Sync: true, Contributions: 1 << 31, GraphServers: 1 << 31}}),
		hostile.Script(hostile.Call{Method: callInit, Msg: &rpc.InitRequest{Dims: []uint32{3, 1 << 20, 2}, Heads: 1 << 20, OutHeads: 1 << 30, LearningRate: 1, Contributions: 1, GraphServers: 1}}),
	}
}

// FuzzParamServer runs hostile scripts of Init, Pull, Push and Watch calls against a fresh
// shard (0 of 2) served over gRPC on loopback: every call succeeds or is refused with a code
// that says why — InvalidArgument or FailedPrecondition for what can never be served,
// NotFound for a dropped version, AlreadyExists for a second push, Aborted for a restart, and
// DeadlineExceeded only for the calls that wait (Init for the other graph servers, Pull for a
// version not made yet, Watch) — never Internal, Unknown or a lost connection; memory follows
// the script's size; the server answers its health check after each script.
func FuzzParamServer(f *testing.F) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	srv, h := rpc.NewServer(rpc.WithMaxMessage(fuzzLimit))
	cur := &current{}
	rpc.RegisterParamServerServer(srv, cur)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rpc.Serve(ctx, lis, srv, h); close(done) }() // stopped by the cleanup
	conn, err := rpc.Dial(lis.Addr().String(), rpc.WithMaxMessage(fuzzLimit))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close(); cancel(); <-done })
	client, health := rpc.NewParamServerClient(conn), healthpb.NewHealthClient(conn)

	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	budget := hostile.Budget{Fixed: 4 << 20, PerByte: 64}
	f.Fuzz(func(t *testing.T, b []byte) {
		calls := hostile.Parse(b, fuzzCalls, methods, request)
		budget.Check(t, len(b), "script", func() {
			shard, err := New(0, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer shard.Close()
			shard.LimitMessage(fuzzLimit)
			cur.s.Store(shard)
			for i, c := range calls {
				if err := run(ctx, client, c); err != nil {
					t.Fatalf("call %d (%T %v): %v", i, c.Msg, c.Msg, err)
				}
			}
		})
		hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
		defer hcancel()
		if resp, err := health.Check(hctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health after the script: %v %v", resp, err)
		}
	})
}

// run makes one call with a short deadline and returns an error when its outcome is not one
// FuzzParamServer allows.
func run(ctx context.Context, client rpc.ParamServerClient, c hostile.Call) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	var err error
	waits := true
	switch m := c.Msg.(type) {
	case *rpc.InitRequest:
		_, err = client.Init(ctx, m)
	case *rpc.PullRequest:
		_, err = client.Pull(ctx, m)
	case *rpc.PushRequest:
		_, err = client.Push(ctx, m)
		waits = false
	case *rpc.WatchRequest:
		var st rpc.ParamServer_WatchClient
		if st, err = client.Watch(ctx, m); err == nil {
			for err == nil {
				_, err = st.Recv()
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
	}
	switch status.Code(err) {
	case codes.OK, codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound, codes.AlreadyExists, codes.Aborted:
		return nil
	case codes.DeadlineExceeded:
		if waits {
			return nil
		}
	}
	return err
}
