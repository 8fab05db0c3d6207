package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// TestPreemptionCheckpointsTheEpochReached sends SIGTERM to a real `dorylus train
// --graph-servers 2 --param-servers 2` once it reported epoch 120 of 400, checkpointing every
// 100 epochs, asynchronous (S=1) and synchronous: the launcher must exit with an error naming
// the epoch the servers drained to and how to resume; both parameter servers' newest
// checkpoint must be of that epoch, at least 120 — not the periodic one of epoch 100: the
// parameter servers took the graph servers' pushes after SIGTERM until the drain ended — and
// the run resumed with --resume must start after it and end within 1 point of the test
// accuracy of an uninterrupted run. It logs the epochs and the drain's time.
func TestPreemptionCheckpointsTheEpochReached(t *testing.T) {
	const epochs, at = 400, 120
	drained := regexp.MustCompile(`training preempted \(seed 1\) after epoch ([0-9]+), drained in ([^:]+): run the same command with --resume`)
	for _, mode := range []string{"1", "sync"} {
		t.Run("staleness-"+mode, func(t *testing.T) {
			args := func(dir string, extra ...string) []string {
				return distArgs(epochs, dir, append([]string{"--staleness", mode, "--checkpoint-every", "100"}, extra...)...)
			}
			straight := runCLI(t, args(t.TempDir())...).PerRun[0]

			dir := t.TempDir()
			run := startLogged(t, exec.Command(dorylusBin, args(dir)...))
			if !run.until(fmt.Sprintf("epoch %d/%d", at, epochs)) {
				t.Fatalf("no epoch %d reported:\n%s", at, run.text())
			}
			if err := run.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			run.rest()
			err := run.cmd.Wait()
			took := time.Since(sent)
			m := drained.FindStringSubmatch(run.text())
			if err == nil || m == nil {
				t.Fatalf("after SIGTERM: exit %v, want an error naming the epoch drained to and --resume:\n%s", err, run.text())
			}
			reached, _ := strconv.Atoi(m[1])
			folder := runFolder(t, dir)
			for s := range 2 {
				if ck := latest(t, filepath.Join(folder, fmt.Sprintf("shard-%d", s))).Epoch; ck != reached || ck < at {
					t.Errorf("shard %d: newest checkpoint of epoch %d; want the epoch drained to, %d, at least %d", s, ck, reached, at)
				}
			}
			resumed := runCLI(t, args(dir, "--resume")...).PerRun[0]
			if resumed.ResumedFrom != reached || resumed.EpochsRun != epochs {
				t.Errorf("resumed from epoch %d and ran to %d; want %d and %d", resumed.ResumedFrom, resumed.EpochsRun, reached, epochs)
			}
			if d := math.Abs(resumed.TestAcc - straight.TestAcc); d > 0.01 || straight.TestAcc < 0.7 {
				t.Errorf("test accuracy %.4f resumed, %.4f uninterrupted: want within 1 point, above 0.7", resumed.TestAcc, straight.TestAcc)
			}
			t.Logf("staleness %s: SIGTERM after epoch %d reported; drained to and checkpointed epoch %d (the launcher said %s; exited %v after the signal); resumed from %d: test accuracy %.4f against %.4f uninterrupted",
				mode, at, reached, m[2], took.Round(time.Millisecond), resumed.ResumedFrom, resumed.TestAcc, straight.TestAcc)
		})
	}
}

// TestOneServerSIGTERMPreemptsTheRun sends SIGTERM to one server alone of a run of 2 graph
// servers and 1 parameter server (S=1) that checkpoints (every 10000 epochs: none is due),
// once graph server 0 reported epoch 30: graph server 1's goes to graph server 0 as a notice
// (CommandRequest.preempt), the parameter server's to the graph servers on their Watch streams
// (VersionUpdate.preempt). Either way graph server 0 must report the drain's end
// (EventPreempted) and exit within 30 s, and the shard's newest checkpoint, once it stopped
// (by itself when it got the signal, else on the launcher's stop), must be of the epoch
// drained to, past 30.
func TestOneServerSIGTERMPreemptsTheRun(t *testing.T) {
	dir := coraPartitions(t)
	for _, victim := range []string{"graph-server 1", "param-server 0"} {
		t.Run(strings.ReplaceAll(victim, " ", "-"), func(t *testing.T) {
			servers := newLocalServers(t, 3)
			logs := servers.logs
			ckpt := t.TempDir()
			run := serverConfig(t, dir, servers.addrs, 2, func(c *jobconfig.RunConfig) {
				c.Training.Epochs, c.Training.EvalEvery, c.Training.Staleness = 100000, 100000, jobconfig.Bounded(1)
				c.Checkpoint = &jobconfig.Checkpoint{IntervalEpochs: 10000, RunID: "preempt", Path: ckpt}
			})
			gs0, gs1, ps, events := servers.startRun(run)
			lines := make(chan graphserver.Event, 64)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(events)
				for sc.Scan() {
					var ev graphserver.Event
					if json.Unmarshal(sc.Bytes(), &ev) == nil {
						lines <- ev
					}
				}
			}()
			next := func(what string) graphserver.Event {
				select {
				case ev, ok := <-lines:
					if !ok {
						t.Fatalf("graph server 0's events ended before %s\n%s", what, logs.w)
					}
					return ev
				case <-time.After(30 * time.Second):
					t.Fatalf("no %s from graph server 0 within 30 s\n%s", what, logs.w)
				}
				return graphserver.Event{}
			}
			for ev := next("epoch 30"); ev.Event != graphserver.EventEpoch || ev.Epoch < 30; ev = next("epoch 30") {
			}
			hit := map[string]*launcher.Process{"graph-server 1": gs1, "param-server 0": ps}[victim]
			sent := time.Now()
			if err := hit.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			ev := next("the drain's end")
			for ; ev.Event != graphserver.EventPreempted; ev = next("the drain's end") {
			}
			select {
			case <-gs0.Done():
			case <-time.After(30 * time.Second):
				t.Fatalf("graph server 0 still running 30 s after SIGTERM to %s\n%s", victim, logs.w)
			}
			took := time.Since(sent)
			if victim == "param-server 0" {
				select {
				case <-ps.Done():
				case <-time.After(30 * time.Second):
					t.Fatalf("parameter server 0 still running 30 s after its SIGTERM\n%s", logs.w)
				}
			}
			servers.stopAll() // the parameter server, if still serving, saves as it stops
			if ck := latest(t, filepath.Join(ckpt, "shard-0")).Epoch; ck != ev.Epoch || ck <= 30 {
				t.Errorf("newest checkpoint of epoch %d; want the epoch drained to, %d, past 30\n%s", ck, ev.Epoch, logs.w)
			}
			t.Logf("SIGTERM to %s after epoch 30 was reported: drained to epoch %d, graph server 0 exited after %v: %s", victim, ev.Epoch, took.Round(time.Millisecond), gs0.Tail())
		})
	}
}
