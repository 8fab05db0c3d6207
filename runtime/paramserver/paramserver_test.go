package paramserver

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var dims = []uint32{6, 4, 3}

func initReq(gs uint32, sync bool) *rpc.InitRequest {
	return &rpc.InitRequest{GraphServer: gs, Dims: dims, Seed: 7, LearningRate: 0.01, WeightDecay: 5e-4,
		Sync: sync, Contributions: 4, GraphServers: 2, Run: "test"}
}

func gradient(rng *rand.Rand, l int) *tensor.Dense {
	g := tensor.NewDense(int(dims[l]), int(dims[l+1]))
	for i := range g.Data {
		g.Data[i] = float32(rng.NormFloat64())
	}
	return g
}

func push(t *testing.T, s *Shard, p, i, epoch int, version uint64, grads map[int]*tensor.Dense) (*rpc.PushReply, error) {
	t.Helper()
	req := &rpc.PushRequest{GraphServer: uint32(p), Version: version,
		Task: &rpc.TaskRef{Partition: uint32(p), Interval: uint32(i), Epoch: uint32(epoch)}}
	for _, l := range s.Layers() {
		req.Grads = append(req.Grads, &rpc.LayerTensor{Layer: uint32(l), Tensor: rpc.NewTensor(grads[l])})
	}
	return s.Push(context.Background(), req)
}

func pull(t *testing.T, s *Shard, v uint64) []*tensor.Dense {
	t.Helper()
	r, err := s.Pull(context.Background(), &rpc.PullRequest{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	var out []*tensor.Dense
	for _, lt := range r.Layers {
		w := tensor.NewDense(int(lt.Tensor.Rows), int(lt.Tensor.Cols))
		if err := lt.Tensor.DecodeInto(w); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	return out
}

// TestSyncStepEqualsSummedAdam pushes four intervals' gradients to two shards and checks that
// the new version is one Adam step with the sum, as the single-process trainer takes it.
func TestSyncStepEqualsSummedAdam(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shards := []*Shard{mustShard(t, 0, 2), mustShard(t, 1, 2)}
	for _, s := range shards {
		mustInitAll(t, s, initReq(0, true), initReq(1, true))
	}
	cfg := model.GCNConfig{InDim: 6, Hidden: 4, Classes: 3, Layers: 2}
	ref := cfg.InitWeights(7)
	adam, _ := model.NewAdam(model.DefaultAdam(0.01, 5e-4, 2), ref)
	for epoch := range 3 {
		sum := []*tensor.Dense{tensor.NewDense(6, 4), tensor.NewDense(4, 3)}
		for c := range 4 {
			g := map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)}
			tensor.AddInPlace(sum[0], g[0])
			tensor.AddInPlace(sum[1], g[1])
			for _, s := range shards {
				r, err := push(t, s, c/2, c%2, epoch, uint64(epoch), g)
				if err != nil {
					t.Fatal(err)
				}
				if want := uint64(epoch + boolInt(c == 3)); r.Version != want {
					t.Fatalf("epoch %d push %d: version %d, want %d", epoch, c, r.Version, want)
				}
			}
		}
		if err := adam.Step(ref, sum); err != nil {
			t.Fatal(err)
		}
		for l, s := range shards {
			got := pull(t, s, uint64(epoch+1))[0]
			for i, v := range got.Data {
				if math.Abs(float64(v-ref[l].Data[i])) > 1e-6 {
					t.Fatalf("epoch %d layer %d element %d: %v, want %v", epoch, l, i, v, ref[l].Data[i])
				}
			}
		}
	}
	s := shards[0]
	if _, err := push(t, s, 0, 0, 3, 2, map[int]*tensor.Dense{0: gradient(rng, 0)}); err == nil {
		t.Error("a gradient of an old version was accepted in synchronous mode")
	}
	if _, err := push(t, s, 0, 0, 3, 3, map[int]*tensor.Dense{0: gradient(rng, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := push(t, s, 0, 0, 3, 3, map[int]*tensor.Dense{0: gradient(rng, 0)}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a second push of the same interval: %v", err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mustShard(t *testing.T, id, n int) *Shard {
	t.Helper()
	s, err := New(id, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAsyncVersionsAndCollection applies each push at once and drops versions no graph server
// may still read.
// TestInitStaleness: an Init carries the run's staleness bound, not only its mode: a bound
// given with sync is refused, and a graph server whose bound differs from the first's
// describes another run.
func TestInitStaleness(t *testing.T) {
	bad := initReq(0, true)
	bad.Staleness = 1
	if _, err := mustShard(t, 0, 1).Init(context.Background(), bad); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "staleness must be 0 with sync, got 1") {
		t.Errorf("sync with staleness 1: %v, want InvalidArgument naming the staleness", err)
	}
	s := mustShard(t, 0, 1)
	first, second := initReq(0, false), initReq(1, false)
	first.Staleness, second.Staleness = 1, 2
	if _, err := s.Init(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Init(context.Background(), second); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "describes another run") {
		t.Errorf("graph server 1 with staleness 2 after graph server 0's 1: %v, want InvalidArgument", err)
	}
}

func TestAsyncVersionsAndCollection(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := mustShard(t, 0, 1)
	for gs := range 2 {
		if _, err := s.Init(context.Background(), initReq(uint32(gs), false)); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 6 {
		r, err := push(t, s, k%2, k/2%2, k/4, 0, map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)})
		if err != nil || r.Version != uint64(k+1) {
			t.Fatalf("push %d: version %v, %v", k, r, err)
		}
	}
	if got := s.Versions(); len(got) != 7 {
		t.Fatalf("before every graph server reported, versions %v were dropped", got)
	}
	ctx := context.Background()
	_, _ = s.Pull(ctx, &rpc.PullRequest{GraphServer: 0, Version: 6, Keep: &rpc.Keep{Seq: 1, Pinned: []uint64{2}, Newest: 5}}) // only its Keep matters here
	_, _ = s.Pull(ctx, &rpc.PullRequest{GraphServer: 1, Version: 6, Keep: &rpc.Keep{Seq: 1, Pinned: []uint64{3, 4}, Newest: 6}})
	if got := s.Versions(); !slices.Equal(got, []uint64{2, 3, 4, 5, 6}) {
		t.Errorf("kept versions %v, want 2 3 4 5 6", got)
	}
	_, _ = s.Pull(ctx, &rpc.PullRequest{GraphServer: 1, Version: 6, Keep: &rpc.Keep{Seq: 0, Pinned: nil, Newest: 0}}) // stale: ignored
	_, _ = s.Pull(ctx, &rpc.PullRequest{GraphServer: 0, Version: 6, Keep: &rpc.Keep{Seq: 2, Newest: 6}})
	if got := s.Versions(); !slices.Equal(got, []uint64{3, 4, 6}) {
		t.Errorf("kept versions %v, want 3 4 6", got)
	}
	if _, err := s.Pull(ctx, &rpc.PullRequest{Version: 2}); err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Errorf("pull of a dropped version: %v", err)
	}
	// Versions 0 and 1 are gone; their buffers serve new versions.
	if r, err := push(t, s, 1, 0, 1, 6, map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)}); err != nil || r.Version != 7 {
		t.Fatalf("push after collection: %v, %v", r, err)
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		bad := gradient(rng, 0)
		bad.Data[3] = float32(x)
		if _, err := push(t, s, 0, 0, 1, 6, map[int]*tensor.Dense{0: bad, 1: gradient(rng, 1)}); err == nil || !strings.Contains(err.Error(), "not finite") {
			t.Errorf("gradient with %v: %v", x, err)
		}
	}
	bad := initReq(1, false)
	bad.Seed = 8
	if _, err := s.Init(ctx, bad); err == nil {
		t.Error("an Init of another model was accepted")
	}
	_, err := s.Init(ctx, initReq(1, false))
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "graph server 1 restarted during an asynchronous run") {
		t.Errorf("a second Init of graph server 1 in an asynchronous run: %v", err)
	}
	if _, err := s.Pull(ctx, &rpc.PullRequest{GraphServer: 0, Version: 7}); status.Code(err) != codes.Aborted {
		t.Errorf("a pull after graph server 1 restarted: %v, want the run refused", err)
	}
}

// TestPullWaitsOverGRPC serves a shard on loopback, pulls a version that does not exist yet,
// and watches it appear; Init's reply carries the shard's advertised address.
func TestPullWaitsOverGRPC(t *testing.T) {
	s := mustShard(t, 0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := serveShard(t, ctx, s)
	if _, err := c.Pull(ctx, &rpc.PullRequest{}); err == nil {
		t.Error("pull before Init succeeded")
	}
	s.Advertise("10.0.0.9:5100")
	if r, err := c.Init(ctx, initReq(0, false)); err != nil || r.Advertise != "10.0.0.9:5100" {
		t.Fatalf("Init: %v, %v; want the advertised address", r, err)
	}
	watch, err := c.Watch(ctx, &rpc.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := watch.Recv(); err != nil || u.Version != 0 {
		t.Fatalf("first update %v, %v", u, err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := c.Pull(ctx, &rpc.PullRequest{Version: 1})
		if err == nil && (r.Version != 1 || len(r.Layers) != 2) {
			t.Errorf("pulled %v", r)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	rng := rand.New(rand.NewPCG(5, 6))
	if _, err := push(t, s, 0, 0, 0, 0, map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if u, err := watch.Recv(); err != nil || u.Version != 1 {
		t.Fatalf("second update %v, %v", u, err)
	}
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	if _, err := c.Pull(short, &rpc.PullRequest{Version: 9}); err == nil {
		t.Error("a pull of a version that never comes returned")
	}
}

// TestGATParameters checks that an Init with heads makes the shards hold a GAT's W, a_dst,
// a_src and bias of every layer, initialised as the single-process trainer does, sharded by
// tensor index, and that a synchronous step applies Adam with the decay on every tensor.
func TestGATParameters(t *testing.T) {
	g := model.GATConfig{InDim: 6, Hidden: 2, Heads: 3, OutHeads: 1, Classes: 4, Layers: 2}
	req := func(gs uint32) *rpc.InitRequest {
		return &rpc.InitRequest{GraphServer: gs, Dims: []uint32{6, 6, 4}, Seed: 9, LearningRate: 0.01, WeightDecay: 5e-4,
			Sync: true, Contributions: 1, GraphServers: 1, Run: "gat", Heads: 3, OutHeads: 1}
	}
	ref := g.InitParams(9).Tensors()
	shards := []*Shard{mustShard(t, 0, 3), mustShard(t, 1, 3), mustShard(t, 2, 3)}
	got := make([]*tensor.Dense, len(ref))
	for i, s := range shards {
		r, err := s.Init(context.Background(), req(0))
		if err != nil {
			t.Fatal(err)
		}
		for k, w := range pull(t, s, 0) {
			l := int(r.Layers[k])
			if l%3 != i {
				t.Fatalf("shard %d holds tensor %d", i, l)
			}
			got[l] = w
		}
	}
	for l, w := range ref {
		if got[l] == nil || !slices.Equal(got[l].Data, w.Data) {
			t.Fatalf("tensor %d differs from GATConfig.InitParams", l)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	grads := make([]*tensor.Dense, len(ref))
	for l, w := range ref {
		grads[l] = tensor.NewDense(w.Rows, w.Cols)
		for i := range grads[l].Data {
			grads[l].Data[i] = float32(rng.NormFloat64())
		}
	}
	decay := make([]float32, len(ref))
	for i := range decay {
		decay[i] = 5e-4
	}
	adam, _ := model.NewAdam(model.AdamConfig{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: decay}, ref)
	if err := adam.Step(ref, grads); err != nil {
		t.Fatal(err)
	}
	for _, s := range shards {
		m := map[int]*tensor.Dense{}
		for _, l := range s.Layers() {
			m[l] = grads[l]
		}
		if _, err := push(t, s, 0, 0, 0, 0, m); err != nil {
			t.Fatal(err)
		}
		for k, w := range pull(t, s, 1) {
			if !slices.Equal(w.Data, ref[s.Layers()[k]].Data) {
				t.Fatalf("tensor %d after one step differs from Adam with decay on every tensor", s.Layers()[k])
			}
		}
	}
	bad := req(0)
	bad.Dims = []uint32{6, 5, 4}
	if _, err := mustShard(t, 0, 1).Init(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "heads") {
		t.Errorf("hidden width 5 with 3 heads: %v", err)
	}
}

// initAll sends the Inits at once, as the graph servers of a run do, and returns the replies
// and the first error.
func initAll(s *Shard, reqs ...*rpc.InitRequest) ([]*rpc.InitReply, error) {
	replies, errs := make([]*rpc.InitReply, len(reqs)), make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { replies[i], errs[i] = s.Init(context.Background(), req) })
	}
	wg.Wait()
	return replies, errors.Join(errs...)
}

// mustInitAll is initAll failing the test on an error.
func mustInitAll(t *testing.T, s *Shard, reqs ...*rpc.InitRequest) []*rpc.InitReply {
	t.Helper()
	r, err := initAll(s, reqs...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSyncRestartRestartsAll restarts graph server 1 of a synchronous run: its Init waits
// until graph server 0 sends Init again, and graph server 0, which had not noticed, is told to
// restart through its Watch stream and its next Push (Aborted), so that both resume at the
// newest version together and no epoch's rows are lost between them.
func TestSyncRestartRestartsAll(t *testing.T) {
	s := mustShard(t, 0, 1)
	mustInitAll(t, s, initReq(0, true), initReq(1, true))
	rng := rand.New(rand.NewPCG(3, 4))
	g := map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)}
	for c := range 4 {
		if _, err := push(t, s, c/2, c%2, 0, 0, g); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watch, err := serveShard(t, ctx, s).Watch(ctx, &rpc.WatchRequest{GraphServer: 0})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := watch.Recv(); err != nil || u.Version != 1 {
		t.Fatalf("watch: %v, %v", u, err)
	}

	restarted := make(chan *rpc.InitReply, 1)
	go func() {
		r, err := s.Init(ctx, initReq(1, true))
		if err != nil {
			t.Error(err)
		}
		restarted <- r
	}()
	if _, err := watch.Recv(); status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "graph server 0 must restart too") {
		t.Fatalf("graph server 0's watch after graph server 1 restarted: %v", err)
	}
	if _, err := push(t, s, 0, 0, 1, 1, g); status.Code(err) != codes.Aborted {
		t.Fatalf("push of graph server 0 before it restarted: %v", err)
	}
	select {
	case r := <-restarted:
		t.Fatalf("graph server 1's Init returned (%v) before graph server 0 sent Init again", r)
	case <-time.After(100 * time.Millisecond):
	}
	if r := mustInitAll(t, s, initReq(0, true)); r[0].Version != 1 {
		t.Fatalf("graph server 0 resumes at version %d, want 1", r[0].Version)
	}
	if r := <-restarted; r == nil || r.Version != 1 {
		t.Fatalf("graph server 1 resumes at %v, want version 1", r)
	}
	for c := range 4 {
		if _, err := push(t, s, c/2, c%2, 1, 1, g); err != nil {
			t.Fatalf("epoch 1 after the restart: %v", err)
		}
	}
}

// serveShard serves s over gRPC on loopback until ctx ends and returns a client of it.
func serveShard(t *testing.T, ctx context.Context, s *Shard) rpc.ParamServerClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, h := rpc.NewServer()
	rpc.RegisterParamServerServer(srv, s)
	go func() { _ = rpc.Serve(ctx, lis, srv, h) }() // ends with ctx
	conn, err := rpc.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rpc.NewParamServerClient(conn)
}
