package graphserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/internal/procmem"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/runtime/paramserver"
)

// fakeReporter records every report; it fails each one with err, and blocks until the
// report's context ends while block is set.
type fakeReporter struct {
	mu      sync.Mutex
	reports []jobstatus.Progress
	at      []time.Time
	err     error
	block   bool
	got     chan struct{}
}

func newFake() *fakeReporter { return &fakeReporter{got: make(chan struct{}, 1000)} }

func (f *fakeReporter) Report(ctx context.Context, p jobstatus.Progress) error {
	f.mu.Lock()
	f.reports, f.at = append(f.reports, p), append(f.at, time.Now())
	err, block := f.err, f.block
	f.mu.Unlock()
	f.got <- struct{}{}
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (f *fakeReporter) epochs() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, p := range f.reports {
		out = append(out, p.Epoch)
	}
	return out
}

func (f *fakeReporter) wait(t *testing.T) {
	t.Helper()
	select {
	case <-f.got:
	case <-time.After(5 * time.Second):
		t.Fatalf("no report; reports so far: %v", f.epochs())
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func equal(a, b []int) bool { return slices.Equal(a, b) }

// TestStatusRateLimited: the first report goes at once, later ones wait for the interval (the
// newest wins), the final one goes at once.
func TestStatusRateLimited(t *testing.T) {
	f := newFake()
	s := newStatusReporter(f, time.Hour, nil)
	s.update(jobstatus.Progress{Epoch: 1}, false)
	f.wait(t)
	for e := 2; e <= 50; e++ {
		s.update(jobstatus.Progress{Epoch: e}, false)
	}
	time.Sleep(20 * time.Millisecond)
	if got := f.epochs(); !equal(got, []int{1}) {
		t.Fatalf("reports within the interval: %v, want [1]", got)
	}
	s.update(jobstatus.Progress{Epoch: 51, TestAccuracy: 0.8}, true)
	f.wait(t)
	if got := f.epochs(); !equal(got, []int{1, 51}) {
		t.Fatalf("reports %v, want [1 51]: the final one at once", got)
	}
	s.close(time.Second)
	if got := f.epochs(); !equal(got, []int{1, 51}) {
		t.Fatalf("reports after close %v, want [1 51]", got)
	}
}

// TestStatusTrailing: a report held back by the interval goes out once it has passed.
func TestStatusTrailing(t *testing.T) {
	const interval = 30 * time.Millisecond
	f := newFake()
	s := newStatusReporter(f, interval, nil)
	defer s.close(time.Second)
	s.update(jobstatus.Progress{Epoch: 1}, false)
	f.wait(t)
	s.update(jobstatus.Progress{Epoch: 2}, false)
	s.update(jobstatus.Progress{Epoch: 3}, false)
	f.wait(t)
	f.mu.Lock()
	gap := f.at[1].Sub(f.at[0])
	f.mu.Unlock()
	if got := f.epochs(); !equal(got, []int{1, 3}) {
		t.Fatalf("reports %v, want [1 3]", got)
	}
	if gap < interval-5*time.Millisecond {
		t.Fatalf("second report %v after the first, want at least %v", gap, interval)
	}
}

// TestStatusFlush: close sends the report held back by the interval, and gives up on a hung
// API server after the flush timeout.
func TestStatusFlush(t *testing.T) {
	f := newFake()
	s := newStatusReporter(f, time.Hour, nil)
	s.update(jobstatus.Progress{Epoch: 1}, false)
	f.wait(t)
	s.update(jobstatus.Progress{Epoch: 2}, false)
	s.close(5 * time.Second)
	if got := f.epochs(); !equal(got, []int{1, 2}) {
		t.Fatalf("reports %v, want [1 2]: close flushes the last", got)
	}

	hung := newFake()
	hung.block = true
	var log syncBuffer
	s = newStatusReporter(hung, time.Hour, &log)
	s.update(jobstatus.Progress{Epoch: 7}, true)
	hung.wait(t)
	start := time.Now()
	s.close(50 * time.Millisecond)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("close took %v with a 50ms flush timeout", d)
	}
	if !strings.Contains(log.String(), "did not finish") {
		t.Fatalf("log %q: want the flush timeout named", log.String())
	}
}

// TestStatusErrorsLogged: a failed report is logged with its reason and later reports go on.
func TestStatusErrorsLogged(t *testing.T) {
	f := newFake()
	f.err = errors.New("forbidden: gnntrainingjobs/status")
	var log syncBuffer
	s := newStatusReporter(f, time.Millisecond, &log)
	s.update(jobstatus.Progress{Epoch: 1}, false)
	f.wait(t)
	s.update(jobstatus.Progress{Epoch: 2}, true)
	f.wait(t)
	s.close(time.Second)
	if got := f.epochs(); !equal(got, []int{1, 2}) {
		t.Fatalf("reports %v, want [1 2]", got)
	}
	l := log.String()
	if !strings.Contains(l, "epoch 1 failed") || !strings.Contains(l, "epoch 2 failed") || !strings.Contains(l, "forbidden: gnntrainingjobs/status") {
		t.Fatalf("log %q: want both failures with their reason", l)
	}
}

// TestRunReportsStatus trains Cora for a few epochs on one graph server whose every status
// report fails: training finishes, the JSON lines are unchanged, the final report carries
// the result, and the failures are logged.
func TestRunReportsStatus(t *testing.T) {
	const epochs = 4
	sh, err := paramserver.New(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	f.err = errors.New("the server could not find the requested resource")
	lines, log := runCora(t, sh, epochs, f)
	if len(lines) != epochs+1 {
		t.Fatalf("%d JSON lines, want %d epochs and the result", len(lines), epochs)
	}
	f.mu.Lock()
	reports := append([]jobstatus.Progress(nil), f.reports...)
	f.mu.Unlock()
	if len(reports) == 0 {
		t.Fatal("no status report")
	}
	last, res := reports[len(reports)-1], lines[epochs]
	if last.Epoch != epochs || last.TrainAccuracy != res.TrainAcc || last.ValAccuracy != *res.ValAcc ||
		last.TestAccuracy != res.TestAcc || last.Loss != lines[epochs-1].Loss || last.TestAccuracy == 0 {
		t.Fatalf("final report %+v, want the result %+v with the last epoch's loss %v", last, res, lines[epochs-1].Loss)
	}
	// Graph servers run in this test's process: their peak memory is at most its own.
	if peak := procmem.Self().Peak; last.GraphServerPeakMemoryBytes <= 0 || last.GraphServerPeakMemoryBytes > peak || lines[epochs-1].PeakRSSBytes != last.GraphServerPeakMemoryBytes {
		t.Errorf("graph servers' peak memory %d in the status, %d in the last epoch line; the process's peak is %d", last.GraphServerPeakMemoryBytes, lines[epochs-1].PeakRSSBytes, peak)
	}
	for i := 1; i < len(reports); i++ {
		if reports[i].Epoch < reports[i-1].Epoch {
			t.Fatalf("reports out of order: %+v", reports)
		}
		if reports[i].LastCheckpointEpoch != nil {
			t.Fatalf("a checkpoint epoch reported without checkpoints: %+v", reports[i])
		}
	}
	if !strings.Contains(log, "could not find the requested resource") {
		t.Fatalf("log %q: want the failed reports", log)
	}
}

// TestStatusCheckpointEpoch trains with a parameter server that checkpoints every 2 epochs:
// the reports carry the epoch of its newest checkpoint once it exists, and a run resumed from
// it reports that epoch from the start.
func TestStatusCheckpointEpoch(t *testing.T) {
	dir := checkpoint.Dir(t.TempDir())
	shard := func(resume bool) *paramserver.Shard {
		sh, err := paramserver.New(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := sh.EnableCheckpoints(paramserver.Checkpointing{Checkpoints: checkpoint.Checkpoints{Store: dir}, Every: 2, Resume: resume}); err != nil {
			t.Fatal(err)
		}
		return sh
	}
	check := func(f *fakeReporter, firstEpoch int, want []int) {
		t.Helper()
		f.mu.Lock()
		defer f.mu.Unlock()
		var got []int
		for _, p := range f.reports {
			if p.Epoch < firstEpoch {
				t.Errorf("report of epoch %d in a run that started after epoch %d", p.Epoch, firstEpoch)
			}
			if p.LastCheckpointEpoch != nil {
				if c := *p.LastCheckpointEpoch; c > p.Epoch+1 {
					t.Errorf("checkpoint of epoch %d reported with epoch %d", c, p.Epoch)
				}
				if len(got) == 0 || got[len(got)-1] != *p.LastCheckpointEpoch {
					got = append(got, *p.LastCheckpointEpoch)
				}
			}
		}
		if !equal(got, want) {
			t.Errorf("checkpoint epochs reported %v, want %v", got, want)
		}
	}
	f := newFake()
	runCora(t, shard(false), 5, f)
	check(f, 0, []int{2, 4})
	f = newFake()
	runCora(t, shard(true), 7, f) // resumes after epoch 4
	check(f, 4, []int{4, 6})
}

// runCora trains Cora for epochs on one graph server with parameter server sh and status
// reporter f, and returns its JSON lines (checked: one per epoch run, then the result) and log.
func runCora(t *testing.T, sh *paramserver.Shard, epochs int, f *fakeReporter) ([]Event, string) {
	t.Helper()
	lines, log, err := tryCora(t, sh, epochs, f)
	if err != nil {
		t.Fatalf("Run returned before the result: %v\n%s", err, log)
	}
	if n := len(lines); n == 0 || lines[n-1].Event != "result" || lines[n-1].Epoch != epochs {
		t.Fatalf("JSON lines do not end with the result after epoch %d: %+v", epochs, lines)
	}
	return lines, log
}

// tryCora is runCora, returning Run's error when it stops before the result.
func tryCora(t *testing.T, sh *paramserver.Shard, epochs int, f *fakeReporter) ([]Event, string, error) {
	t.Helper()
	d, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Skip("cora:", err)
	}
	plan, err := partition.Contiguous(d.Adj.RowPtr, 1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := partition.DatasetPart(d, plan, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	plis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	psrv, ph := rpc.NewServer()
	rpc.RegisterParamServerServer(psrv, sh)
	psDone := make(chan error, 1)
	go func() { psDone <- rpc.Serve(ctx, plis, psrv, ph) }()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend, err := cpu.New(cpu.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var events, log syncBuffer
	cfg := Config{
		Partition: 0, Partitions: 1, Intervals: 2, Data: data,
		Peers: []string{lis.Addr().String()}, ParamServers: []string{plis.Addr().String()}, Run: "status-test",
		Layers: 2, Hidden: 16, Dropout: 0.5, LearningRate: 0.01, WeightDecay: 5e-4, Epochs: epochs, Seed: 1,
		Staleness: jobconfig.Sync, EvalEvery: 1, Backend: backend, Startup: 30 * time.Second,
		Events: &events, Log: &log, Status: f, StatusInterval: time.Millisecond,
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg, lis) }()
	var runErr error
	for runErr == nil && !strings.Contains(events.String(), `"event":"result"`) {
		select {
		case runErr = <-done:
			if runErr == nil {
				runErr = errors.New("Run returned nil before the result")
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
	if runErr == nil {
		stop()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	cancel()
	if err := <-psDone; err != nil {
		t.Fatalf("parameter server: %v", err)
	}

	var lines []Event
	sc := bufio.NewScanner(strings.NewReader(events.String()))
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, ev)
	}
	return lines, log.String(), runErr
}

// TestStatusCheckpointStoreGone trains with a parameter server whose checkpoint folder cannot
// be written: the run stops at the first checkpoint, and the final report says why, so that
// the operator fails the job instead of restarting it.
func TestStatusCheckpointStoreGone(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := paramserver.New(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.EnableCheckpoints(paramserver.Checkpointing{Checkpoints: checkpoint.Checkpoints{Store: checkpoint.Dir(filepath.Join(file, "ckpt"))}, Every: 2}); err != nil {
		t.Fatal(err)
	}
	f := newFake()
	start := time.Now()
	_, _, err = tryCora(t, sh, 50, f)
	if err == nil || !strings.Contains(err.Error(), "checkpoint of epoch 2") {
		t.Fatalf("Run: %v, want an error naming the checkpoint of epoch 2", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stopped after %v", d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.reports); n == 0 || !strings.Contains(f.reports[n-1].FailureMessage, "cannot go on without its checkpoints") {
		t.Fatalf("reports %+v: want a last one with the failure", f.reports)
	}
}

// TestStatusExportFailure: a run that stops because its export failed reports the failure, so
// that the operator fails the job instead of restarting it to train again; the files of a
// finished export are reported first.
func TestStatusExportFailure(t *testing.T) {
	f := newFake()
	cfg, out := &Config{Epochs: 3, Status: f, StatusInterval: time.Millisecond}, &effects{}
	c, rep := newCoordinator(cfg, [3]int{1, 1, 1}, newKeeper(), out), newReports(cfg, nil)
	x := &pendingExport{metrics: model.Metrics{TestAcc: 0.5}}
	c.exported(x, []string{"model.safetensors", "model.json"})
	carried(t, rep, out)
	f.wait(t)
	rep.finish(c.failure(fmt.Errorf("%w: write model.json: disk full", ErrExport)), time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.reports); n != 2 || !slices.Equal(f.reports[0].Outputs, []string{"model.safetensors", "model.json"}) ||
		f.reports[1].FailureMessage != "export failed: write model.json: disk full" {
		t.Errorf("reports %+v: want the outputs, then the failure", f.reports)
	}
}

// TestStatusFinishReportsWhatNoRestartHelps: finish reports as the run's failure only the
// errors no restart can help; a run that a server's failure ended (a peer restarted in an
// asynchronous run without checkpoints: Aborted) or a lost connection is left to whoever sees
// the servers, so that the operator names the failed server instead of a training error.
func TestStatusFinishReportsWhatNoRestartHelps(t *testing.T) {
	for _, tc := range []struct {
		err    error
		report bool
	}{
		{status.Error(codes.DataLoss, "parameter server 0 cannot go on without its checkpoints"), true},
		{status.Error(codes.FailedPrecondition, "parameter server 0: asked to go back to epoch 7 before any Init"), true},
		{fmt.Errorf("%w: write model.json: disk full", ErrExport), true},
		{status.Error(codes.Aborted, "parameter server 0: graph server 1 restarted during an asynchronous run without checkpoints"), false},
		{status.Error(codes.Unavailable, "error reading from server: EOF"), false},
	} {
		f := newFake()
		cfg := &Config{Epochs: 3, Status: f, StatusInterval: time.Millisecond}
		c := newCoordinator(cfg, [3]int{1, 1, 1}, newKeeper(), &effects{})
		newReports(cfg, nil).finish(c.failure(tc.err), time.Second)
		f.mu.Lock()
		reported := len(f.reports) > 0 && strings.HasSuffix(f.reports[len(f.reports)-1].FailureMessage, status.Convert(tc.err).Message())
		f.mu.Unlock()
		if reported != tc.report {
			t.Errorf("finish(%v): reported %v, want %v", tc.err, reported, tc.report)
		}
	}
}
