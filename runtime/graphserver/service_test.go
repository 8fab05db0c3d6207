package graphserver

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
