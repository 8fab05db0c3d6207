package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// marked returns the processes whose environment holds marker (which a launcher's servers
// inherit from it), as "pid: command line".
func marked(marker string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var found []string
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00"+marker+"\x00")) && !bytes.HasPrefix(env, []byte(marker+"\x00")) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		found = append(found, filepath.Base(d)+": "+strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "\x00", " "))
	}
	return found
}

// TestTrainStopsEveryServerOnSignal: dorylus train --graph-servers 12, sent SIGTERM or SIGINT
// at moments from its start (the dataset loading, the partitions being cut, the servers
// starting and loading them) to training, exits within seconds, and not one process it started
// is left.
func TestTrainStopsEveryServerOnSignal(t *testing.T) {
	const servers = 12
	started := 0 // signals that found servers running
	for i, tc := range []struct {
		sig   syscall.Signal
		after time.Duration
	}{
		{syscall.SIGTERM, 100 * time.Millisecond},
		{syscall.SIGTERM, 600 * time.Millisecond},
		{syscall.SIGINT, 1200 * time.Millisecond},
		{syscall.SIGTERM, 2500 * time.Millisecond},
		{syscall.SIGTERM, 6 * time.Second},
	} {
		marker := fmt.Sprintf("DORYLUS_SIGNAL_TEST=%d-%d", os.Getpid(), i)
		cmd := exec.Command(dorylusBin, "train", "--graph-servers", fmt.Sprint(servers), "--intervals", "1",
			"--epochs", "100000", "--eval-every", "100000")
		cmd.Env = append(os.Environ(), marker)
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		var status error // of the launcher, once exited is closed
		go func() { status = cmd.Wait(); close(exited) }()
		time.Sleep(tc.after)
		running := len(marked(marker)) - 1 // but the launcher
		if running > 0 {
			started++
		}
		sent := time.Now()
		if err := cmd.Process.Signal(tc.sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("%v after %v (%d servers running): the launcher still ran 15 s later\n%s", tc.sig, tc.after, running, logs.String())
		}
		took := time.Since(sent)
		var left []string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if left = marked(marker); len(left) == 0 {
				break
			}
		}
		t.Logf("%v after %v: %d servers running, the launcher exited %v later (%v)", tc.sig, tc.after, running, took.Round(10*time.Millisecond), status)
		if len(left) > 0 {
			t.Errorf("%v after %v: %d processes left 5 s after the launcher exited: %s\n%s", tc.sig, tc.after, len(left), strings.Join(left, "; "), logs.String())
			for _, p := range left {
				var pid int
				if _, err := fmt.Sscan(strings.SplitN(p, ":", 2)[0], &pid); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	if started == 0 {
		t.Errorf("no signal found the servers running: the moments test nothing of their start-up")
	}
}

// TestKilledLauncherFolderCleanedAtNextStart: the folder of a dorylus train --graph-servers
// killed with SIGKILL (its run config and the run's key and token) is left behind, in the
// launchers' folder, until the next launcher starts, which removes it.
func TestKilledLauncherFolderCleanedAtNextStart(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	marker := fmt.Sprintf("DORYLUS_SIGNAL_TEST=%d-killed", os.Getpid())
	cmd := exec.Command(dorylusBin, "train", "--graph-servers", "2", "--epochs", "100000", "--eval-every", "100000")
	cmd.Env = append(os.Environ(), marker)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pattern := filepath.Join(tmp, fmt.Sprintf("dorylus-runs-%d", os.Getuid()), fmt.Sprintf("train-%d-*", cmd.Process.Pid), "credentials-*", "tls.key")
	var keys []string
	for deadline := time.Now().Add(60 * time.Second); len(keys) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		keys, _ = filepath.Glob(pattern)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(keys) != 1 {
		t.Fatalf("no run key %s while the launcher ran:\n%s", pattern, logs.String())
	}
	for deadline := time.Now().Add(10 * time.Second); len(marked(marker)) > 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
	}
	if left := marked(marker); len(left) > 0 {
		t.Errorf("servers left 10 s after their launcher was killed: %v", left)
	}
	run := filepath.Dir(filepath.Dir(keys[0]))
	if _, err := os.Stat(keys[0]); err != nil {
		t.Fatalf("the killed launcher's key: %v (a SIGKILL runs no removal: it should be left)", err)
	}
	next, err := launcher.WorkDir("train")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(next)
	if _, err := os.Stat(run); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed launcher's folder %s after the next start: %v, want it removed", run, err)
	}
	if st, err := os.Stat(next); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the next launcher's folder %s: %v, %v: want a folder of the user's alone", next, st, err)
	}
}

// TestSignalStopsThePartitionStep: dorylus train --graph-servers 4 and dorylus prepare
// --partitions 4 of an R-MAT graph whose cut takes about 15 s, sent SIGTERM 2 s in, while the
// graph is generated and cut, exit within 3 s saying the cut stopped; no process is left, and
// train's folder (under $TMPDIR) is removed.
func TestSignalStopsThePartitionStep(t *testing.T) {
	const rmat = "rmat:nodes=1000000,edges=5000000,features=4,classes=2,seed=1"
	tmp := t.TempDir()
	for i, args := range [][]string{
		{"train", "--graph-servers", "4", "--epochs", "1", "--dataset", rmat},
		{"prepare", "--partitions", "4", rmat, filepath.Join(tmp, "parts")},
	} {
		marker := fmt.Sprintf("DORYLUS_SIGNAL_TEST=%d-partition-%d", os.Getpid(), i)
		cmd := exec.Command(dorylusBin, args...)
		cmd.Env = append(os.Environ(), marker, "TMPDIR="+tmp)
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		time.Sleep(2 * time.Second)
		sent := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			err = <-exited
		}
		took := time.Since(sent)
		t.Logf("%s: SIGTERM 2 s in: exited %v later (%v)", args[0], took.Round(10*time.Millisecond), err)
		if err == nil || took > 3*time.Second || !strings.Contains(logs.String(), "into 4 partitions: stopped: terminated signal received") {
			t.Errorf("%s: SIGTERM 2 s in: exited %v later with %v, want within 3 s, the cut stopped:\n%s", args[0], took, err, logs.String())
		}
		if left := marked(marker); len(left) > 0 {
			t.Errorf("%s: processes left: %v", args[0], left)
		}
	}
	if runs, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf("dorylus-runs-%d", os.Getuid()), "train-*")); len(runs) > 0 {
		t.Errorf("train's folder left: %v", runs)
	}
}
