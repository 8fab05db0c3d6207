package dispatch_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// TestPlacementByKind places layer 1's tasks locally on a cpu backend whose latency (an hour)
// stands for a call: they complete at once with Execute's results, layer 0's wait out the
// latency (and fail at a short deadline); the placement decides once per op and layer and
// counts every task where it ran, and RunsLocally, asked before each, tells the same place
// without counting it.
func TestPlacementByKind(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := requests(rng, graph.Features{Sparse: sparse(rng, 7, 9)})
	decided := 0
	p := dispatch.NewPlacement(func(r *dispatch.TaskRequest) bool { decided++; return r.Layer == 1 })
	b, err := cpu.New(cpu.Options{Workers: 2, Latency: time.Hour, Placement: p})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, req := range reqs {
			if req.Op == dispatch.OpLoss {
				continue
			}
			if p.RunsLocally(&req) != (req.Layer == 1) {
				t.Errorf("%v layer %d: RunsLocally %v", req.Op, req.Layer, req.Layer != 1)
			}
			want, err := dispatch.Execute(&req, nil)
			if err != nil {
				t.Fatal(err)
			}
			wait := 10 * time.Second
			if req.Layer == 0 {
				wait = 20 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			got, err := b.Run(ctx, req)
			cancel()
			switch {
			case req.Layer == 0 && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("%v layer 0: %v, want the latency's deadline", req.Op, err)
			case req.Layer == 1 && err != nil:
				t.Fatalf("%v layer 1, placed locally: %v", req.Op, err)
			case req.Layer == 1:
				same(t, req.Op.String(), got.Out, want.Out)
			}
		}
	}
	if decided != 4 {
		t.Errorf("decided %d times, want once per op and layer (4)", decided)
	}
	kinds := p.Kinds()
	want := []dispatch.Placed{{Op: dispatch.OpForward, Task: "AV", Layer: 0, Tasks: 2}, {Op: dispatch.OpForward, Task: "AV", Layer: 1, Local: true, Tasks: 2},
		{Op: dispatch.OpBackward, Task: "∇AV", Layer: 0, Tasks: 2}, {Op: dispatch.OpBackward, Task: "∇AV", Layer: 1, Local: true, Tasks: 2}}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %+v, want %+v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Errorf("kind %d: %+v, want %+v", i, kinds[i], want[i])
		}
	}
	if l, r := p.Counts(); l != 4 || r != 4 {
		t.Errorf("counts %d local, %d remote; want 4 and 4", l, r)
	}
	var none *dispatch.Placement
	if l, r := none.Counts(); none.Local(&reqs[0]) || none.RunsLocally(&reqs[0]) || none.Kinds() != nil || l != 0 || r != 0 {
		t.Error("a nil placement places a task locally")
	}
}
