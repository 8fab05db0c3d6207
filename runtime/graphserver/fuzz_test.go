package graphserver

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/internal/hostile"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// The methods a fuzzed script calls, by the first byte of each call. callLocalEpoch is no RPC:
// graph server 0 reports its own next epoch to its loop, as it does when it finishes one.
const (
	callHello = iota
	callPushRows
	callProgress
	callCommand
	callEpochDone
	callEvalDone
	callLocalEpoch
	methods
)

// fuzzCalls is the most calls of one script; fuzzLimit the fuzzed server's message limit.
const (
	fuzzCalls = 12
	fuzzLimit = 128 << 10
)

// request returns an empty request of method m.
func request(m byte) proto.Message {
	switch m {
	case callHello:
		return &rpc.HelloRequest{}
	case callPushRows:
		return &rpc.RowsBatch{}
	case callProgress:
		return &rpc.ProgressReport{}
	case callCommand:
		return &rpc.CommandRequest{}
	case callEvalDone:
		return &rpc.EvalReport{}
	}
	return &rpc.EpochReport{}
}

// current serves the graph server of the script being run: each script starts from a fresh
// one on the same gRPC server.
type current struct {
	rpc.UnimplementedGraphServerServer
	v atomic.Pointer[service]
}

func (c *current) Hello(ctx context.Context, r *rpc.HelloRequest) (*rpc.HelloReply, error) {
	return c.v.Load().Hello(ctx, r)
}
func (c *current) PushRows(ctx context.Context, r *rpc.RowsBatch) (*rpc.Ack, error) {
	return c.v.Load().PushRows(ctx, r)
}
func (c *current) Progress(ctx context.Context, r *rpc.ProgressReport) (*rpc.Ack, error) {
	return c.v.Load().Progress(ctx, r)
}
func (c *current) Command(ctx context.Context, r *rpc.CommandRequest) (*rpc.Ack, error) {
	return c.v.Load().Command(ctx, r)
}
func (c *current) EpochDone(ctx context.Context, r *rpc.EpochReport) (*rpc.Ack, error) {
	return c.v.Load().EpochDone(ctx, r)
}
func (c *current) EvalDone(ctx context.Context, r *rpc.EvalReport) (*rpc.Ack, error) {
	return c.v.Load().EvalDone(ctx, r)
}

// fuzzConfigs returns the configs of the two graph servers of a small GCN run (R-MAT, 60
// vertices, 2 intervals each, 2 layers, 3 epochs, staleness 1), whose peers and parameter
// server are a closed loopback port.
func fuzzConfigs(t testing.TB) [2]Config {
	d, err := graph.RMAT(graph.RMATParams{Nodes: 60, Edges: 240, Features: 6, Classes: 3, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := partition.New(d.Adj, 2, partition.DefaultMethod)
	if err != nil {
		t.Fatal(err)
	}
	backend, err := cpu.New(cpu.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	const closed = "127.0.0.1:1"
	var out [2]Config
	for p := range out {
		c := Config{Partition: p, Partitions: 2, Intervals: 2, Peers: []string{closed, closed}, ParamServers: []string{closed}, Run: "fuzz",
			Layers: 2, Hidden: 4, LearningRate: 0.01, Epochs: 3, Seed: 1, Staleness: jobconfig.Bounded(1), EvalEvery: 1, Backend: backend}
		if c.Data, err = partition.DatasetPart(d, plan, p); err != nil {
			t.Fatal(err)
		}
		if err := c.validate(); err != nil {
			t.Fatal(err)
		}
		out[p] = c
	}
	return out
}

// fuzzRun is one script's graph server: built by newServer and trained from epoch 0, its
// service served by current, and a loop that steps on every event the handlers post and
// carries out what each step asks but its tasks (its peers and parameter server are not
// there).
type fuzzRun struct {
	s      *server
	v      *service
	cancel context.CancelFunc
	loop   chan error
	g      *errgroup.Group
	local  int // graph server 0's next own epoch report
}

func startFuzzRun(ctx context.Context, t testing.TB, cfg Config) *fuzzRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &fuzzRun{cancel: cancel, loop: make(chan error, 1), g: &errgroup.Group{}}
	s, err := newServer(ctx, r.g, cfg) // the group has no context: a failed evaluation ends nothing here
	if err == nil {
		err = r.step(s, trainFrom{0})
	}
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r.s, r.v = s, s.service()
	go func() { r.loop <- r.steps(ctx) }()
	return r
}

// steps steps on the events until ctx ends and then on those still queued; it returns the
// first error, which would have ended the run.
func (r *fuzzRun) steps(ctx context.Context) error {
	for {
		select {
		case ev := <-r.s.events:
			if err := r.step(r.s, ev); err != nil {
				return err
			}
		case <-ctx.Done():
			for {
				select {
				case ev := <-r.s.events:
					if err := r.step(r.s, ev); err != nil {
						return err
					}
				default:
					return nil
				}
			}
		}
	}
}

// step steps s's loop on ev and carries out what it asks but the tasks.
func (r *fuzzRun) step(s *server, ev event) error {
	out, err := s.loop.step(ev)
	out.runTasks = nil
	if werr := s.carry(out); err == nil {
		err = werr
	}
	return err
}

// stop ends the run and returns the loop's error.
func (r *fuzzRun) stop() error {
	r.cancel()
	err := <-r.loop
	_ = r.g.Wait() // evaluations that failed to reach the absent parameter server
	r.s.peers.close()
	r.s.shards.close()
	return err
}

// finite keeps a fuzzed loss finite: a non-finite training loss ends the run by design.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.Abs(x) > 1e300 {
		return 0
	}
	return x
}

// call makes one call of a script and returns an error when its outcome is not one
// FuzzGraphServer allows.
func (r *fuzzRun) call(ctx context.Context, client rpc.GraphServerClient, c hostile.Call) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	switch m := c.Msg.(type) {
	case *rpc.HelloRequest:
		_, err = client.Hello(ctx, m)
	case *rpc.RowsBatch:
		_, err = client.PushRows(ctx, m)
	case *rpc.ProgressReport:
		_, err = client.Progress(ctx, m)
	case *rpc.CommandRequest:
		_, err = client.Command(ctx, m)
	case *rpc.EvalReport:
		_, err = client.EvalDone(ctx, m)
	case *rpc.EpochReport:
		m.Loss = finite(m.Loss)
		if c.Method == callEpochDone {
			_, err = client.EpochDone(ctx, m)
		} else if r.s.loop.coord != nil && r.local < r.s.cfg.Epochs {
			r.s.post(epochReported{rep: &rpc.EpochReport{From: 0, Epoch: uint32(r.local), Loss: m.Loss}})
			r.local++
		}
	}
	switch status.Code(err) {
	case codes.OK, codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return nil
	}
	return err
}

// script makes the calls, and then a valid Hello, which must succeed.
func (r *fuzzRun) script(ctx context.Context, client rpc.GraphServerClient, calls []hostile.Call) error {
	for i, c := range calls {
		if err := r.call(ctx, client, c); err != nil {
			return fmt.Errorf("call %d (%T %v): %w", i, c.Msg, c.Msg, err)
		}
	}
	q := 1 - r.s.cfg.Partition
	valid := &rpc.HelloRequest{From: uint32(q), Partitions: 2, Intervals: 2, Ghosts: uint64(len(r.s.lay.part.SendTo[q])), Run: "fuzz"}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := client.Hello(ctx, valid); err != nil {
		return fmt.Errorf("a valid hello after the script: %w", err)
	}
	return nil
}

// fuzzSeeds returns scripts for graph server 1 (first byte 1) and the coordinator (0): a
// peer's rows, progress and commands of a run that trains, and reports that complete an epoch
// and its evaluation. The hostile scripts that once ended the run are under
// testdata/fuzz/FuzzGraphServer: a WU of an interval past the sender's, a report of an
// evaluation that is not running, a second report of one epoch (counted twice), and an
// evaluation id past the run's.
func fuzzSeeds(t testing.TB, cfgs [2]Config) [][]byte {
	c := func(m byte, msg proto.Message) hostile.Call { return hostile.Call{Method: m, Msg: msg} }
	var parts [2]*partition.Part
	for p, cfg := range cfgs {
		part, _, err := newPart(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		parts[p] = part
	}
	rows := func(n, d int) *rpc.Tensor {
		return &rpc.Tensor{Rows: uint32(n), Cols: uint32(d), Data: make([]byte, 4*n*d)}
	}
	hello := func(from int) *rpc.HelloRequest {
		return &rpc.HelloRequest{From: uint32(from), Partitions: 2, Intervals: 2, Ghosts: uint64(len(parts[1-from].SendTo[from])), Run: "fuzz"}
	}
	p1 := parts[1]
	g0 := p1.GhostsOf(0)
	ids := make([]byte, 0, 8)
	ids = append(ids, rpc.Int32Bytes([]int32{0, int32(p1.Owned - 1)})...)
	sc := &rpc.TaskRef{Partition: 0, Interval: 1, Epoch: 0, Layer: 1, Kind: uint32(pipeline.KindSC)}
	backSC := &rpc.TaskRef{Partition: 0, Interval: 0, Epoch: 0, Layer: 0, Kind: uint32(pipeline.KindBackSC)}
	wu := &rpc.TaskRef{Partition: 0, Interval: 1, Kind: uint32(pipeline.KindWU)}
	peer := hostile.Script(c(callHello, hello(0)),
		c(callPushRows, &rpc.RowsBatch{From: 0, Flow: rpc.Flow_FLOW_FORWARD, Task: sc, Offset: 0, Data: rows(g0, 3)}),
		c(callPushRows, &rpc.RowsBatch{From: 0, Flow: rpc.Flow_FLOW_GRADIENT, Task: backSC, Rows: ids, Data: rows(2, 4)}),
		c(callProgress, &rpc.ProgressReport{From: 0, Done: []*rpc.TaskRef{wu}}),
		c(callCommand, &rpc.CommandRequest{Stop: true, StopAfter: 1}),
		c(callPushRows, &rpc.RowsBatch{From: 0, Flow: rpc.Flow_FLOW_EVAL, Task: &rpc.TaskRef{Layer: 0}, Data: rows(g0, 4)}),
		c(callCommand, &rpc.CommandRequest{Evaluate: &rpc.Evaluate{Id: 0, Version: 0}}))
	report := &rpc.EpochReport{From: 1, Epoch: 0, Loss: 0.5}
	eval := &rpc.EvalReport{From: 1, Id: 0, Correct: []uint64{1, 2, 3}, Loss: []float64{0.1, 0.2}}
	coord := hostile.Script(c(callHello, hello(1)), c(callEpochDone, report), c(callLocalEpoch, &rpc.EpochReport{Loss: 0.5}),
		c(callEvalDone, eval), c(callEpochDone, &rpc.EpochReport{From: 1, Epoch: 1}))
	return [][]byte{
		append([]byte{1}, peer...),
		append([]byte{0}, coord...),
	}
}

// FuzzGraphServer runs hostile scripts of Hello, PushRows, Progress, Command, EpochDone and
// EvalDone calls against a fresh graph server (graph server 1 of 2, or the coordinator, by
// the script's first byte) served over gRPC on loopback: every call succeeds or is refused
// with InvalidArgument, FailedPrecondition or OutOfRange, within its deadline; no event the
// handlers post makes the server's loop fail (which would end the run); memory follows the
// script's size; after the script, a valid Hello succeeds and the server answers its health
// check.
func FuzzGraphServer(f *testing.F) {
	cfgs := fuzzConfigs(f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	srv, h := rpc.NewServer(rpc.WithMaxMessage(fuzzLimit))
	cur := &current{}
	rpc.RegisterGraphServerServer(srv, cur)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rpc.Serve(ctx, lis, srv, h); close(done) }() // stopped by the cleanup
	conn, err := rpc.Dial(lis.Addr().String(), rpc.WithMaxMessage(fuzzLimit))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close(); cancel(); <-done })
	client, health := rpc.NewGraphServerClient(conn), healthpb.NewHealthClient(conn)

	for _, s := range fuzzSeeds(f, cfgs) {
		f.Add(s)
	}
	budget := hostile.Budget{Fixed: 8 << 20, PerByte: 64}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		p := int(b[0] & 1)
		calls := hostile.Parse(b[1:], fuzzCalls, methods, request)
		budget.Check(t, len(b), "script", func() {
			r := startFuzzRun(ctx, t, cfgs[p])
			cur.v.Store(r.v)
			err := r.script(ctx, client, calls)
			if stopped := r.stop(); err == nil && stopped != nil {
				err = fmt.Errorf("the loop failed on what the handlers took: %w", stopped)
			}
			if err != nil {
				t.Fatalf("graph server %d: %v", p, err)
			}
		})
		hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
		defer hcancel()
		if resp, err := health.Check(hctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health after the script: %v %v", resp, err)
		}
	})
}
