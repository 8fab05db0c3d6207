package graphserver

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
)

// TestInferenceRefusesTraining: an inference's loop has no scheduler, so a training message
// (rows of a training task, progress, a stop, an epoch report) is refused with
// FailedPrecondition before anything is posted; it once made the loop dereference the
// missing scheduler.
func TestInferenceRefusesTraining(t *testing.T) {
	ctx := context.Background()
	posted := 0
	serve := func(p int) *service {
		return &service{cfg: &Config{Partition: p, Partitions: 2, Epochs: 1, Weights: []safetensors.Tensor{{Name: "w"}}}, post: func(event) { posted++ }}
	}
	calls := map[string]func() error{
		"training rows": func() error {
			_, err := serve(1).PushRows(ctx, &rpc.RowsBatch{From: 0, Flow: rpc.Flow_FLOW_FORWARD, Task: &rpc.TaskRef{}, Data: &rpc.Tensor{}})
			return err
		},
		"progress": func() error {
			_, err := serve(1).Progress(ctx, &rpc.ProgressReport{From: 0})
			return err
		},
		"stop": func() error {
			_, err := serve(1).Command(ctx, &rpc.CommandRequest{Stop: true})
			return err
		},
		"epoch report": func() error {
			_, err := serve(0).EpochDone(ctx, &rpc.EpochReport{From: 1})
			return err
		},
	}
	for what, call := range calls {
		if err := call(); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s to an inference: %v, want FailedPrecondition", what, err)
		}
	}
	if posted != 0 {
		t.Errorf("%d events posted", posted)
	}
}

// TestCoordinatorRefusesReports: a second report of an epoch or an evaluation from one
// partition (once counted as another partition's), an epoch past the run's or already summed,
// and an evaluation that is not running (once an error that ended the run) are refused with
// errRefused, and leave the tally as it was.
func TestCoordinatorRefusesReports(t *testing.T) {
	cfg := &Config{Partitions: 2, Epochs: 3, EvalEvery: 1}
	c := newCoordinator(cfg, [3]int{1, 1, 1}, newKeeper(), &effects{})
	c.begin(0)
	take := func(r *rpc.EpochReport) {
		t.Helper()
		if err := c.admitEpoch(r); err != nil {
			t.Fatal(err)
		}
		if _, err := c.epochDone(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	take(&rpc.EpochReport{From: 1, Epoch: 0})
	for _, r := range []*rpc.EpochReport{{From: 1, Epoch: 0}, {From: 1, Epoch: 3}} {
		if err := c.admitEpoch(r); !errors.Is(err, errRefused) {
			t.Errorf("epoch report %v: %v, want refused", r, err)
		}
	}
	if c.next != 0 {
		t.Fatalf("epoch %d summed with one partition's report", c.next)
	}
	take(&rpc.EpochReport{From: 0, Epoch: 0}) // completes epoch 0 and starts its evaluation
	if err := c.admitEpoch(&rpc.EpochReport{From: 1, Epoch: 0}); !errors.Is(err, errRefused) {
		t.Errorf("a report of a summed epoch: %v, want refused", err)
	}
	eval := &rpc.EvalReport{From: 1, Id: 0, Correct: []uint64{1, 0, 0}, Loss: []float64{0.5, 0.5}}
	if err := c.admitEval(eval); err != nil {
		t.Fatal(err)
	}
	if _, err := c.evalDone(eval); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*rpc.EvalReport{eval, {From: 0, Id: 1, Correct: []uint64{0, 0, 0}, Loss: []float64{0, 0}}, {From: 0, Id: 0, Correct: []uint64{1}}} {
		if err := c.admitEval(r); !errors.Is(err, errRefused) {
			t.Errorf("evaluation report %v: %v, want refused", r, err)
		}
	}
	if a := c.evals[0]; a == nil || len(a.from) != 1 || a.correct[0] != 1 {
		t.Fatalf("evaluation 0's tally %+v: want graph server 1's report alone", a)
	}
}

// TestHelloRefusesAnotherAttempt: a peer started in another attempt of the run (a pod a
// restart deleted that is still terminating, or one not yet replaced) is answered Aborted, which
// the caller retries, while a peer of another run is refused for good (FailedPrecondition).
func TestHelloRefusesAnotherAttempt(t *testing.T) {
	v := &service{cfg: &Config{Partition: 1, Partitions: 2, Intervals: 1, Run: "ns/job/uid", Attempt: 2}, lay: &layout{part: &partition.Part{SendTo: [][]int32{nil, nil}}}}
	hello := func(run string, attempt uint32) error {
		_, err := v.Hello(context.Background(), &rpc.HelloRequest{From: 0, Partitions: 2, Intervals: 1, Run: run, Attempt: attempt})
		return err
	}
	if err := hello("ns/job/uid", 2); err != nil {
		t.Fatalf("a peer of the same attempt: %v", err)
	}
	for _, a := range []uint32{1, 3} {
		if err := hello("ns/job/uid", a); status.Code(err) != codes.Aborted {
			t.Errorf("a peer of attempt %d to one of attempt 2: %v, want Aborted", a, err)
		}
	}
	if err := hello("ns/job/other", 2); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a peer of another run: %v, want FailedPrecondition", err)
	}
}

// stalePeer answers Hello as a peer of another attempt until stale calls have passed.
type stalePeer struct {
	rpc.UnimplementedGraphServerServer
	stale int
	calls atomic.Int32
}

func (p *stalePeer) Hello(context.Context, *rpc.HelloRequest) (*rpc.HelloReply, error) {
	if int(p.calls.Add(1)) <= p.stale {
		return nil, status.Error(codes.Aborted, "started in another attempt")
	}
	return &rpc.HelloReply{}, nil
}

// TestHelloWaitsForTheRightAttempt: a graph server whose peer answers as one of another attempt
// (Aborted) asks again until its replacement answers, over real gRPC on loopback; with a startup
// timeout shorter than the wait it gives up naming the refusal.
func TestHelloWaitsForTheRightAttempt(t *testing.T) {
	for _, tc := range []struct {
		stale   int
		startup time.Duration
		ok      bool
	}{{stale: 3, ok: true}, {stale: 1000, startup: 3 * rpc.CheckEvery}} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peer := &stalePeer{stale: tc.stale}
		g := grpc.NewServer()
		rpc.RegisterGraphServerServer(g, peer)
		go func() { _ = g.Serve(lis) }()
		ps, err := dialPeers(0, []string{"", lis.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		s := &server{cfg: Config{Partition: 0, Partitions: 2, Intervals: 1, Startup: tc.startup},
			lay: &layout{part: &partition.Part{GhostStart: []int{0, 0, 0}}}, peers: ps}
		err = s.hello(context.Background())
		switch {
		case tc.ok && (err != nil || int(peer.calls.Load()) != tc.stale+1):
			t.Errorf("peer stale for %d calls: %v after %d calls, want success at call %d", tc.stale, err, peer.calls.Load(), tc.stale+1)
		case !tc.ok && status.Code(err) != codes.Aborted:
			t.Errorf("peer stale past the startup timeout: %v, want its Aborted refusal", err)
		}
		ps.close()
		g.Stop()
	}
}
