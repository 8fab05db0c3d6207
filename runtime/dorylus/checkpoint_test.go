package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// runFolder returns the folder (or prefix) of the one run whose checkpoints location holds.
func runFolder(t *testing.T, location string) string {
	t.Helper()
	st, err := checkpoint.Open(context.Background(), location, objstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	folders, err := st.Folders(context.Background())
	if err != nil || len(folders) != 1 || !strings.HasPrefix(folders[0], jobconfig.RunFolder("")) {
		t.Fatalf("%s holds %v (%v), want one run's folder", location, folders, err)
	}
	return strings.TrimSuffix(location, "/") + "/" + folders[0]
}

// latest returns the newest complete checkpoint at location.
func latest(t *testing.T, location string) checkpoint.State {
	t.Helper()
	st, err := checkpoint.Open(context.Background(), location, objstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, skipped, err := checkpoint.Checkpoints{Store: st}.Latest(context.Background())
	if err != nil || len(skipped) > 0 {
		t.Fatalf("latest checkpoint in %s: %v (skipped %v)", location, err, skipped)
	}
	return s
}

// sameWeights fails t unless a and b hold the same tensors to 1e-5 (absolute, or relative for
// values above 1).
func sameWeights(t *testing.T, a, b checkpoint.State) {
	t.Helper()
	if len(a.Tensors) != len(b.Tensors) || len(a.Tensors) == 0 {
		t.Fatalf("%d tensors against %d", len(a.Tensors), len(b.Tensors))
	}
	for name, x := range a.Tensors {
		y := b.Tensors[name]
		if len(x) != len(y) {
			t.Fatalf("%s: %d values against %d", name, len(x), len(y))
		}
		for i := range x {
			if d := math.Abs(float64(x[i] - y[i])); d > 1e-5*math.Max(1, math.Abs(float64(x[i]))) {
				t.Fatalf("%s[%d]: %g against %g", name, i, x[i], y[i])
			}
		}
	}
}

// trainJSON runs `dorylus train` with args and returns its first run's report.
func trainJSON(t *testing.T, args ...string) runResult {
	t.Helper()
	out, logs, err := run(t, append([]string{"train", "--output", "json"}, args...)...)
	if err != nil {
		t.Fatalf("train %v: %v\n%s", args, err, logs)
	}
	var rep trainReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.PerRun) != 1 {
		t.Fatalf("train %v: %v\n%s", args, err, out)
	}
	return rep.PerRun[0]
}

// TestResumeEqualsUninterrupted trains Cora 20 epochs straight, and 10 epochs then 10 more
// resumed from the checkpoint, to a folder and to S3 on a real MinIO: the final weights and
// optimizer state must agree to 1e-5.
func TestResumeEqualsUninterrupted(t *testing.T) {
	straight := filepath.Join(t.TempDir(), "straight")
	trainJSON(t, "--epochs", "20", "--checkpoint-dir", straight, "--checkpoint-every", "20")
	want := latest(t, runFolder(t, straight))
	if want.Epoch != 20 || want.Position != 20 {
		t.Fatalf("straight run: checkpoint of epoch %d, position %d; want 20, 20", want.Epoch, want.Position)
	}
	resume := func(t *testing.T, loc string) {
		first := trainJSON(t, "--epochs", "10", "--checkpoint-dir", loc, "--checkpoint-every", "5")
		if first.Checkpoints != 2 || first.CheckpointSeconds <= 0 {
			t.Errorf("first half: %d checkpoints in %gs, want 2 (epochs 5, 10)", first.Checkpoints, first.CheckpointSeconds)
		}
		second := trainJSON(t, "--epochs", "20", "--checkpoint-dir", loc, "--checkpoint-every", "5", "--resume")
		if second.ResumedFrom != 10 || second.EpochsRun != 20 {
			t.Errorf("second half resumed from epoch %d and ran to %d; want 10 and 20", second.ResumedFrom, second.EpochsRun)
		}
		got := latest(t, runFolder(t, loc))
		if got.Epoch != 20 || got.Position != 20 || got.Run != want.Run {
			t.Fatalf("resumed run: checkpoint of epoch %d, position %d, run %q; want 20, 20, %q", got.Epoch, got.Position, got.Run, want.Run)
		}
		sameWeights(t, want, got)
		if _, logs, err := run(t, "train", "--epochs", "20", "--hidden", "32", "--checkpoint-dir", loc, "--resume"); err == nil || !strings.Contains(err.Error(), "another run") {
			t.Errorf("resuming with another --hidden: %v, want an error saying the checkpoint is of another run\n%s", err, logs)
		}
	}
	t.Run("dir", func(t *testing.T) { resume(t, filepath.Join(t.TempDir(), "ckpt")) })
	t.Run("s3", func(t *testing.T) {
		m := minio.Start(t)
		m.Env(t)
		t.Setenv(objstore.EnvEndpoint, m.Endpoint)
		resume(t, "s3://"+m.Bucket(t, "ckpt")+"/runs/cora")
	})
}

// TestSIGTERMCheckpointsAndResumes stops a real `dorylus train` process with SIGTERM mid-run:
// it must exit with an error, leave a checkpoint of the last completed epoch, and a run resumed
// from it must end with the weights of an undisturbed run to 1e-5.
func TestSIGTERMCheckpointsAndResumes(t *testing.T) {
	const epochs = "300"
	dir := filepath.Join(t.TempDir(), "ckpt")
	run := startLogged(t, exec.Command(dorylusBin, "train", "--epochs", epochs, "--checkpoint-dir", dir, "--checkpoint-every", "1000", "--eval-every", "1000"))
	if run.until("epoch 60/" + epochs) {
		if err := run.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	run.rest()
	done := make(chan error, 1)
	go func() { done <- run.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = run.cmd.Process.Kill()
		t.Fatalf("still running 30 s after SIGTERM:\n%s", run.text())
	}
	all := run.text()
	if err == nil || !strings.Contains(all, "training stopped at epoch") || !strings.Contains(all, "saved in "+dir) {
		t.Fatalf("after SIGTERM: exit %v, want an error saying where the checkpoint went:\n%s", err, all)
	}
	cut := latest(t, runFolder(t, dir))
	if cut.Epoch < 60 || cut.Epoch >= 300 {
		t.Fatalf("checkpoint of epoch %d after SIGTERM at epoch 60 or later of 300", cut.Epoch)
	}
	resumed := trainJSON(t, "--epochs", epochs, "--checkpoint-dir", dir, "--checkpoint-every", "1000", "--eval-every", "1000", "--resume")
	if resumed.ResumedFrom != cut.Epoch {
		t.Errorf("resumed from epoch %d, the checkpoint is of %d", resumed.ResumedFrom, cut.Epoch)
	}
	straight := filepath.Join(t.TempDir(), "straight")
	trainJSON(t, "--epochs", epochs, "--checkpoint-dir", straight, "--checkpoint-every", "1000", "--eval-every", "1000")
	sameWeights(t, latest(t, runFolder(t, straight)), latest(t, runFolder(t, dir)))
}

// TestNewRunKeepsItsOwnCheckpoints reproduces the loss of a new run's checkpoints to an older
// run's (the older run's epochs 280, 290 and 300 in the folder, in its run folder or written
// flat before runs had ids): a new run without --resume, single-process or on servers, must
// refuse to start naming the older run and its epochs, leaving the folder as it was; a new run
// in a fresh folder keeps every checkpoint of its own (--keep 3 of epochs 10, 20, 30) in its
// own run folder, each manifest naming the run.
func TestNewRunKeepsItsOwnCheckpoints(t *testing.T) {
	ctx := context.Background()
	older := func(st checkpoint.Store, id string) {
		for _, ep := range []int{280, 290, 300} {
			s := checkpoint.State{Run: "gcn older", Epoch: ep, Tensors: map[string][]float32{"w0": {1}}}
			if err := (checkpoint.Checkpoints{Store: st, RunID: id, Keep: 3}).Save(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	inRun, flat := t.TempDir(), t.TempDir()
	older(checkpoint.Dir(inRun).Sub(jobconfig.RunFolder("older")), "older")
	older(checkpoint.Dir(flat), "")
	for _, c := range []struct{ dir, want string }{
		{inRun, "holds the checkpoints of run older (epochs [300 290 280]): pass --resume to continue it, or another --checkpoint-dir to start over"},
		{flat, "holds the checkpoints of an earlier run (epochs [300 290 280]): pass --resume"},
	} {
		for _, args := range [][]string{
			{"train", "--epochs", "30", "--checkpoint-dir", c.dir, "--checkpoint-every", "10", "--keep", "3"},
			distArgs(30, c.dir, "--checkpoint-every", "10", "--keep", "3"),
		} {
			if _, logs, err := run(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v, want %q\n%s", args, err, c.want, logs)
			}
		}
	}
	for dir, st := range map[string]checkpoint.Store{inRun: checkpoint.Dir(inRun).Sub(jobconfig.RunFolder("older")), flat: checkpoint.Dir(flat)} {
		if eps, err := (checkpoint.Checkpoints{Store: st}).Epochs(ctx); err != nil || !slices.Equal(eps, []int{300, 290, 280}) {
			t.Errorf("%s: the older run's checkpoints are now %v (%v)", dir, eps, err)
		}
		if folders, _ := checkpoint.Dir(dir).Folders(ctx); len(folders) > 1 {
			t.Errorf("%s: a refused run left a folder: %v", dir, folders)
		}
	}
	fresh := t.TempDir()
	trainJSON(t, "--epochs", "30", "--checkpoint-dir", fresh, "--checkpoint-every", "10", "--keep", "3")
	own := runFolder(t, fresh)
	id := strings.TrimPrefix(filepath.Base(own), jobconfig.RunFolder(""))
	cps := checkpoint.Checkpoints{Store: checkpoint.Dir(own), RunID: id}
	if eps, err := cps.Epochs(ctx); err != nil || !slices.Equal(eps, []int{30, 20, 10}) {
		t.Errorf("the new run kept %v (%v), want [30 20 10]", eps, err)
	}
	for _, ep := range []int{10, 20, 30} {
		if _, err := cps.Load(ctx, ep); err != nil {
			t.Errorf("the new run's checkpoint of epoch %d: %v", ep, err)
		}
	}
}

func TestCheckpointFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--resume"}, "--resume needs --checkpoint-dir"},
		{[]string{"--checkpoint-dir", t.TempDir(), "--checkpoint-every", "0"}, "--checkpoint-every 0"},
		{[]string{"--checkpoint-dir", t.TempDir(), "--runs", "2"}, "one run at a time"},
	} {
		_, _, err := run(t, append([]string{"train", "--epochs", "1"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("train %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

// distArgs are the flags of a synchronous Cora run on 2 graph servers and 2 parameter servers.
func distArgs(epochs int, dir string, extra ...string) []string {
	return append([]string{"train", "--graph-servers", "2", "--param-servers", "2", "--intervals", "3", "--output", "json",
		"--epochs", fmt.Sprint(epochs), "--eval-every", fmt.Sprint(epochs), "--checkpoint-dir", dir}, extra...)
}

// sameShards compares the latest checkpoints of both parameter-server shards of two runs, in
// their run folders a and b.
func sameShards(t *testing.T, a, b string, epoch int) {
	t.Helper()
	for s := range 2 {
		x, y := latest(t, filepath.Join(a, fmt.Sprintf("shard-%d", s))), latest(t, filepath.Join(b, fmt.Sprintf("shard-%d", s)))
		if x.Epoch != epoch || y.Epoch != epoch {
			t.Fatalf("shard %d: checkpoints of epochs %d and %d, want %d", s, x.Epoch, y.Epoch, epoch)
		}
		sameWeights(t, x, y)
	}
}

// TestDistributedResumeEqualsUninterrupted trains Cora synchronously on real server processes
// 20 epochs straight, and 10 epochs then 10 more resumed from the parameter servers'
// checkpoints, a GCN, a GAT and a GraphSAGE network: both shards must end with the same
// weights and Adam state to 1e-5.
func TestDistributedResumeEqualsUninterrupted(t *testing.T) {
	for _, m := range [][]string{{"--model", "gcn"}, {"--model", "gat", "--patience", "0"}, {"--model", "sage"}} {
		t.Run(m[1], func(t *testing.T) {
			straight, cut := t.TempDir(), t.TempDir()
			runCLI(t, distArgs(20, straight, append(m, "--checkpoint-every", "20")...)...)
			first := runCLI(t, distArgs(10, cut, append(m, "--checkpoint-every", "5")...)...)
			second := runCLI(t, distArgs(20, cut, append(m, "--checkpoint-every", "5", "--resume")...)...)
			if first.PerRun[0].ResumedFrom != 0 || second.PerRun[0].ResumedFrom != 10 || len(second.PerRun[0].Curve) != 0 && second.PerRun[0].Curve[0].Epoch != 11 {
				t.Errorf("resumed from epoch %d (first half: %d), want 10", second.PerRun[0].ResumedFrom, first.PerRun[0].ResumedFrom)
			}
			sameShards(t, runFolder(t, straight), runFolder(t, cut), 20)
			if math.Abs(first.TestAccuracy-second.TestAccuracy) == 0 && first.TestAccuracy == 0 {
				t.Errorf("no test accuracy reported")
			}
		})
	}
}

// childPID returns the pid of the child of pid whose command line contains all of want.
func childPID(t *testing.T, pid int, want ...string) int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			cmdline, _ := os.ReadFile("/proc/" + c + "/cmdline")
			args := strings.ReplaceAll(string(cmdline), "\x00", " ")
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(args, w)
			}
			if ok {
				n, _ := strconv.Atoi(c)
				return n
			}
		}
	}
	t.Fatalf("no child of %d runs %v", pid, want)
	return 0
}

// TestGraphServerSIGKILLResumes kills graph server 1 with SIGKILL mid-run: the launcher must
// stop with an error naming it, the parameter servers keep the last finished epoch, and the
// run resumed from there must end with the weights of an undisturbed run to 1e-5. It logs the
// time from the kill to the first epoch of the resumed run.
func TestGraphServerSIGKILLResumes(t *testing.T) {
	const epochs = 60
	straight, cut := t.TempDir(), t.TempDir()
	runCLI(t, distArgs(epochs, straight, "--checkpoint-every", "10")...)

	killed := killGraphServer1(t, distArgs(epochs, cut, "--checkpoint-every", "10"), 24, epochs)
	// The resumed launch, timed to its first epoch.
	cmd := exec.Command(dorylusBin, distArgs(epochs, cut, "--checkpoint-every", "10", "--resume")...)
	var out strings.Builder
	cmd.Stdout = &out
	run := startLogged(t, cmd)
	var again time.Duration
	if run.until("resumed from the checkpoint of epoch") {
		again = time.Since(killed)
	}
	run.rest()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, run.text())
	}
	var rep trainReport
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil || len(rep.PerRun) != 1 {
		t.Fatalf("resumed run: %v\n%s", err, out.String())
	}
	if from := rep.PerRun[0].ResumedFrom; from < 24 || from >= epochs {
		t.Errorf("resumed from epoch %d after a kill at epoch 24 or later", from)
	}
	t.Logf("graph server SIGKILL at epoch ≥ 24: resumed from epoch %d; kill to parameter servers restored: %v", rep.PerRun[0].ResumedFrom, again)
	sameShards(t, runFolder(t, straight), runFolder(t, cut), epochs)
}

// killGraphServer1 runs dorylus with args (a distributed training of epochs), kills graph
// server 1 with SIGKILL once epoch at is reported, checks that the launcher stops with an error
// naming it, and returns when it was killed.
func killGraphServer1(t *testing.T, args []string, at, epochs int) time.Time {
	t.Helper()
	run := startLogged(t, exec.Command(dorylusBin, args...))
	run.until(fmt.Sprintf("epoch %d/%d", at, epochs))
	victim := childPID(t, run.cmd.Process.Pid, "graph-server", "--partition 1")
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	run.rest()
	err := run.cmd.Wait()
	all := run.text()
	if err == nil || !regexp.MustCompile(`graph-server 1 exited before the run finished \(signal: killed; resident [1-9][0-9]* MiB when last read, peak [1-9][0-9]* MiB\)`).MatchString(all) {
		t.Fatalf("after SIGKILL of graph server 1: exit %v, want an error naming it, the signal and its memory:\n%s", err, all)
	}
	return killed
}

// loggedRun is a started dorylus process whose standard error is read line by line.
type loggedRun struct {
	cmd  *exec.Cmd
	sc   *bufio.Scanner
	logs []string
}

// startLogged starts cmd with its standard error piped to the returned run.
func startLogged(t *testing.T, cmd *exec.Cmd) *loggedRun {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &loggedRun{cmd: cmd, sc: bufio.NewScanner(stderr)}
}

// until reads lines up to and including the first that contains substr; false if the
// output ended first.
func (r *loggedRun) until(substr string) bool {
	for r.sc.Scan() {
		r.logs = append(r.logs, r.sc.Text())
		if strings.Contains(r.sc.Text(), substr) {
			return true
		}
	}
	return false
}

// rest reads the lines left, until the process closes its standard error.
func (r *loggedRun) rest() {
	for r.sc.Scan() {
		r.logs = append(r.logs, r.sc.Text())
	}
}

// text is every line read so far.
func (r *loggedRun) text() string { return strings.Join(r.logs, "\n") }
