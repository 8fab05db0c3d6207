package main

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// asyncEpochs is the length of the asynchronous Cora runs the fault tests disturb: enough for
// the published accuracy, so that a resumed run can be held to within a point of it.
const asyncEpochs = 200

// TestAsyncGraphServerSIGKILLResumes kills graph server 1 with SIGKILL after epoch 100 of an
// asynchronous Cora run (S = 0 and S = 1) that checkpoints every 20 epochs: the launcher must
// stop naming it, and the run resumed from the parameter servers' checkpoints must start at
// the checkpoint of epoch 100 (or a later boundary they saved as they were stopped) and end
// within a point of the test accuracy of an undisturbed run. The traces of both runs must
// show the epoch gate held (no interval started epoch e before every interval finished epoch
// e-S-1) and the pipeline drained before every checkpoint epoch.
func TestAsyncGraphServerSIGKILLResumes(t *testing.T) {
	const every = 20
	for _, s := range []int{0, 1} {
		t.Run(fmt.Sprintf("staleness-%d", s), func(t *testing.T) {
			args := func(dir string, extra ...string) []string {
				return distArgs(asyncEpochs, dir, append([]string{"--staleness", fmt.Sprint(s), "--checkpoint-every", fmt.Sprint(every)}, extra...)...)
			}
			straightTrace := filepath.Join(t.TempDir(), "straight.json")
			want := runCLI(t, args(t.TempDir(), "--trace", straightTrace)...)
			checkGate(t, readTrace(t, straightTrace), s, every, 0)

			cut := t.TempDir()
			killGraphServer1(t, args(cut), 100, asyncEpochs)
			resumedTrace := filepath.Join(t.TempDir(), "resumed.json")
			got := runCLI(t, args(cut, "--resume", "--trace", resumedTrace)...)
			from := got.PerRun[0].ResumedFrom
			t.Logf("staleness %d: SIGKILL of graph server 1 after epoch 100: resumed from epoch %d; test accuracy %.4f, undisturbed %.4f",
				s, from, got.TestAccuracy, want.TestAccuracy)
			// The checkpoint of epoch 100, or a later boundary the parameter servers saved as the
			// launcher stopped them after the kill (as a stopped job's are); never an earlier one.
			if from < 100 || from >= 100+every {
				t.Errorf("resumed from epoch %d, want 100 (the last checkpoint before the kill) or a boundary the stop saved before %d", from, 100+every)
			}
			if math.Abs(got.TestAccuracy-want.TestAccuracy) > 0.01 || got.TestAccuracy == 0 {
				t.Errorf("resumed run's test accuracy %.4f, undisturbed %.4f: more than a point apart", got.TestAccuracy, want.TestAccuracy)
			}
			checkGate(t, readTrace(t, resumedTrace), s, every, from)
		})
	}
}

// TestAsyncFaultsSurvived runs asynchronous (S = 0 and S = 1) Cora trainings on separate
// server processes restarted the way pods are, through a graph server and a parameter server
// killed with SIGKILL after epoch 100: the parameter servers checkpoint every 10 epochs, where
// the pipeline drains, and the run goes on from the checkpoint of epoch 100 or from a later
// epoch boundary the surviving shards hold — never from an earlier one — and ends within a
// point of the test accuracy of an undisturbed run. A killed parameter server resumes from the
// checkpoint of epoch 100 and, with S = 1, the other goes back to it (it is usually past the
// boundary then), or says it holds that boundary (killed before an update of epoch 101 reached
// it). (A killed graph server with S = 1 usually leaves the shards past a boundary too, so they
// go back to 100; killed just as an epoch's last update landed, they hold the boundary and the
// run goes on from there, as parameterserver.restart says.)
func TestAsyncFaultsSurvived(t *testing.T) {
	at100 := regexp.MustCompile(`parameter server 0: (back from version \d+ to the checkpoint of epoch 100|at the boundary of epoch 100 \(version \d+\) as graph server \d restarted: going on from it)\n`)
	data := coraPartitions(t)
	for _, bound := range []int{0, 1} {
		t.Run(fmt.Sprintf("staleness-%d", bound), func(t *testing.T) {
			staleness := jobconfig.Bounded(bound)
			c := newPodCluster(t, data, t.TempDir(), asyncEpochs, staleness)
			want, _ := c.train(-1, 0)
			launcher.StopAll(c.children)
			for _, victim := range []int{1, 3} {
				t.Run(strings.ReplaceAll(podName(victim), " ", "-")+"-killed", func(t *testing.T) {
					c := newPodCluster(t, data, t.TempDir(), asyncEpochs, staleness)
					got, again := c.train(victim, 100)
					launcher.StopAll(c.children)
					t.Logf("S = %d: SIGKILL of %s after epoch 100: training again after %v from epoch %d; test accuracy %.4f, undisturbed %.4f",
						bound, podName(victim), again, c.resumed, got.TestAcc, want.TestAcc)
					if c.resumed <= 100 {
						t.Errorf("resumed at epoch %d, before the checkpoint of epoch 100", c.resumed)
					}
					logs := c.logs.w.(*strings.Builder).String()
					if victim == 3 && !strings.Contains(logs, "parameter server 1: resumed from the checkpoint of epoch 100") {
						t.Errorf("parameter server 1 did not resume from the checkpoint of epoch 100:\n%s", logs)
					}
					if bound == 1 && victim == 3 && (c.resumed != 101 || !at100.MatchString(logs)) {
						t.Errorf("resumed at epoch %d, want 101, or parameter server 0 neither went back to the checkpoint of epoch 100 nor held its boundary:\n%s", c.resumed, logs)
					}
					if math.Abs(got.TestAcc-want.TestAcc) > 0.01 || got.TestAcc == 0 {
						t.Errorf("test accuracy %.4f, undisturbed %.4f: more than a point apart", got.TestAcc, want.TestAcc)
					}
				})
			}
		})
	}
}

// checkGate asserts, on the merged trace of a run of staleness s started at epoch first, that
// no interval started epoch e (its AV_0) before every interval of every graph server had
// finished epoch e-s-1 (its WU), nor an epoch that is a multiple of every before every interval
// had finished the epoch before it: the bound on what it reads, and the drain at checkpoints.
func checkGate(t *testing.T, f trace.File, s, every, first int) {
	t.Helper()
	type interval struct{ server, interval int32 }
	finished := map[int32]map[interval]int64{} // epoch -> interval -> end of its WU
	var starts []trace.Span
	for _, sp := range f.Spans {
		switch {
		case sp.Kind == trace.WU:
			if finished[sp.Epoch] == nil {
				finished[sp.Epoch] = map[interval]int64{}
			}
			finished[sp.Epoch][interval{sp.Server, sp.Interval}] = sp.End
		case sp.Kind == trace.AV && sp.Layer == 0:
			starts = append(starts, sp)
		}
	}
	n := len(finished[int32(first)])
	if len(starts) == 0 || n == 0 {
		t.Fatalf("no epoch starts or no finished intervals in the trace")
	}
	drains := 0
	for _, st := range starts {
		need := int(st.Epoch) - s - 1
		if int(st.Epoch)%every == 0 {
			need = int(st.Epoch) - 1
			drains++
		}
		if need < first {
			continue
		}
		done := finished[int32(need)]
		if len(done) != n {
			t.Fatalf("epoch %d: %d intervals finished it, want %d", need, len(done), n)
		}
		for iv, end := range done {
			if end > st.Start {
				t.Fatalf("staleness %d, drain every %d: graph server %d interval %d started epoch %d before graph server %d interval %d finished epoch %d",
					s, every, st.Server, st.Interval, st.Epoch, iv.server, iv.interval, need)
			}
		}
	}
	if drains == 0 {
		t.Errorf("no epoch start at a checkpoint epoch (every %d) was checked", every)
	}
}
