package graphserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestDrainEnd: the drain's last epoch is the lowest epoch graph server 0's intervals have not
// finished, plus the staleness bound and drainMargin.
func TestDrainEnd(t *testing.T) {
	for _, c := range []struct {
		unfinished []int
		s, want    int
	}{
		{[]int{0}, 0, 2}, {[]int{7, 5, 9}, 1, 8}, {[]int{40, 41}, 3, 45},
	} {
		if got := drainEnd(c.unfinished, c.s); got != c.want {
			t.Errorf("drainEnd(%v, %d) = %d, want %d", c.unfinished, c.s, got, c.want)
		}
	}
}

// TestPreemptChoosesTheDrain steps graph server 0 of two into a preemption right after it began
// training: its one step stops every server, itself included, after epoch 0 + S + drainMargin
// (or the run's last epoch if earlier) with the preemption's mark, and starts bounding the
// drain; a second notice changes nothing.
func TestPreemptChoosesTheDrain(t *testing.T) {
	for _, c := range []struct {
		s          jobconfig.Staleness
		epochs, at int
	}{
		{jobconfig.Sync, 50, 2}, {jobconfig.Bounded(1), 50, 3}, {jobconfig.Bounded(3), 50, 5}, {jobconfig.Bounded(1), 2, 1},
	} {
		t.Run(fmt.Sprintf("S=%v/epochs=%d", c.s, c.epochs), func(t *testing.T) {
			l := stepLoopOf(0, c.epochs, c.s, nil)
			if _, err := l.step(trainFrom{0}); err != nil {
				t.Fatal(err)
			}
			out, err := l.step(preempted{})
			if err != nil {
				t.Fatal(err)
			}
			want := &rpc.CommandRequest{Stop: true, StopAfter: uint32(c.at), Preempt: true}
			if len(out.sendCommands) != 1 || !commandIs(out.sendCommands[0], want) || !out.drain || out.sendPreempt != nil {
				t.Fatalf("preempted: commands %v, drain %v, notice %v; want only %v and the drain", out.sendCommands, out.drain, out.sendPreempt, want)
			}
			if got := l.sched.LastEpoch(); got != c.at {
				t.Errorf("graph server 0 stops after epoch %d, want %d", got, c.at)
			}
			if out, err := l.step(preempted{}); err != nil || len(out.sendCommands) != 0 || out.drain {
				t.Errorf("a second notice: %v, commands %v, drain %v; want nothing", err, out.sendCommands, out.drain)
			}
		})
	}
}

func commandIs(got, want *rpc.CommandRequest) bool {
	return got.Stop == want.Stop && got.StopAfter == want.StopAfter && got.Preempt == want.Preempt && got.Evaluate == nil
}

// TestPreemptAsksTheCoordinator: graph server 1's SIGTERM sends graph server 0 the notice
// (once) and starts the drain, which graph server 0's Stop then only bounds; before training
// began, a notice or graph server 0's Stop ends the server at once with ErrPreempted.
func TestPreemptAsksTheCoordinator(t *testing.T) {
	l := stepLoopOf(1, 50, jobconfig.Bounded(1), nil)
	stop := commanded{&rpc.CommandRequest{Stop: true, StopAfter: 3, Preempt: true}}
	if _, err := l.step(stop); !errors.Is(err, ErrPreempted) {
		t.Fatalf("graph server 0's preemption before training: %v, want ErrPreempted", err)
	}
	if _, err := stepLoopOf(1, 50, jobconfig.Bounded(1), nil).step(preempted{}); !errors.Is(err, ErrPreempted) {
		t.Fatalf("SIGTERM before training: %v, want ErrPreempted", err)
	}
	if _, err := l.step(trainFrom{0}); err != nil {
		t.Fatal(err)
	}
	out, err := l.step(preempted{})
	if err != nil {
		t.Fatal(err)
	}
	if n := out.sendPreempt; n == nil || !n.Preempt || n.Stop || n.From != 1 || !out.drain || len(out.sendCommands) != 0 {
		t.Fatalf("SIGTERM: notice %v, drain %v, commands %v; want the notice from 1 to graph server 0 and the drain", n, out.drain, out.sendCommands)
	}
	if out, _ := l.step(preempted{}); out.sendPreempt != nil || out.drain {
		t.Errorf("a second SIGTERM: notice %v, drain %v; want none", out.sendPreempt, out.drain)
	}
	if out, err := l.step(stop); err != nil || out.drain || l.sched.LastEpoch() != 3 {
		t.Errorf("graph server 0's Stop: %v, drain %v, last epoch %d; want no new drain, last epoch 3", err, out.drain, l.sched.LastEpoch())
	}
}

// TestDrainTimesOut: a drain that does not end within Config.DrainTimeout ends the run with an
// error that is ErrPreempted and names the timeout; once it began, a failed message to a peer
// (one that drained exits) does not end the run, while before it one does.
func TestDrainTimesOut(t *testing.T) {
	s := &server{g: new(errgroup.Group), ctx: context.Background(), cfg: Config{DrainTimeout: 30 * time.Millisecond}}
	s.spawnLink(func(context.Context) error { return errors.New("peer 1 is gone") })
	if err := s.g.Wait(); err == nil || !strings.Contains(err.Error(), "peer 1 is gone") {
		t.Fatalf("a failed message outside a drain: %v, want its error", err)
	}
	s.g = new(errgroup.Group)
	start := time.Now()
	s.startDrain()
	s.spawnLink(func(context.Context) error { return errors.New("peer 1 is gone") })
	err := s.g.Wait()
	if !errors.Is(err, ErrPreempted) || !strings.Contains(err.Error(), "the drain did not end within 30ms") {
		t.Fatalf("a drain that does not end: %v, want ErrPreempted naming the 30ms", err)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("the drain timed out after %v, before its 30ms", took)
	}
}

// TestPreemptAfterTheLastEpochStops: SIGTERM once the run has trained its last epoch (graph
// server 1 of a 1-epoch run, its own intervals and its peer's done) has nothing to drain: the
// step ends the server with errStopped, which Run returns as nil, and sends no notice.
func TestPreemptAfterTheLastEpochStops(t *testing.T) {
	l := stepLoopOf(1, 1, jobconfig.Sync, nil)
	step := func(ev event) []pipeline.Started {
		t.Helper()
		out, err := l.step(ev)
		if err != nil {
			t.Fatalf("%T %+v: %v", ev, ev, err)
		}
		return slices.Clone(out.runTasks)
	}
	trainEpoch(t, l, step)
	step(progressed{[]pipeline.Task{{Partition: 0, Kind: pipeline.KindWU}}})
	if !l.sched.Finished() {
		t.Fatal("the run is not finished after its epoch and the peer's")
	}
	out, err := l.step(preempted{})
	if !errors.Is(err, errStopped) || out.sendPreempt != nil || out.drain {
		t.Errorf("SIGTERM after the last epoch: %v, notice %v, drain %v; want errStopped and neither", err, out.sendPreempt, out.drain)
	}
}
