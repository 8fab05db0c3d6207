package main

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
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
