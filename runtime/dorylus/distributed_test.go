package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// dorylusBin is the dorylus binary built once for the multi-process tests.
var dorylusBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dorylus-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dorylusBin = filepath.Join(dir, "dorylus")
	if out, err := exec.Command("go", "build", "-o", dorylusBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build dorylus: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// jobCredentials issues a run's credentials (pkg/pki) into a folder of the test's and returns
// it: the servers' TLS credentials (distOptions.tlsDir) and the HTTP functions' --token-file.
func jobCredentials(t *testing.T) string {
	t.Helper()
	b, err := pki.Issue(t.Name())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "credentials")
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serverConfig writes the run config of a Cora GCN on the partitions in data, with graph
// servers at the first gs of addrs and parameter-server shards at the others, changed by
// mutate, and returns its path: what the servers read, as in a pod.
func serverConfig(t *testing.T, data string, addrs []string, gs int, mutate func(*jobconfig.RunConfig)) string {
	t.Helper()
	d := distOptions{staleness: jobconfig.Sync, intervals: 2, deadAfter: rpc.DefaultDeadAfter, backend: backends.Options{Kind: jobconfig.BackendCPU},
		tlsDir: jobCredentials(t)}
	o := coraOptions(1)
	c, err := o.runConfig(&d, data, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := launcher.SetAddresses(c, addrs[:gs], addrs[gs:]); err != nil {
		t.Fatal(err)
	}
	if c.Dataset, err = source.Parse(data); err != nil { // a local folder or s3://bucket/prefix
		t.Fatal(err)
	}
	mutate(c)
	path := filepath.Join(t.TempDir(), "run.json")
	if err := launcher.WriteConfig(path, c); err != nil {
		t.Fatal(err)
	}
	return path
}

func coraOptions(epochs int) trainOptions {
	return trainOptions{dataset: "cora", model: "gcn", layers: 2, hidden: 16, dropout: 0.5, lr: 0.01, weightDecay: 5e-4,
		epochs: epochs, seed: 1, runs: 1, evalEvery: 1, output: "json",
		cost: defaultCostOptions()}
}

// singleProcess trains seed on Cora with the single-process trainer and returns the training
// loss of every epoch and the final evaluation.
func singleProcess(t *testing.T, o trainOptions, seed uint64) ([]float64, model.Metrics) {
	t.Helper()
	d, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	graph.RowNormalize(d.Features.Sparse)
	tr, err := newLearner(d, o, seed)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for e := range o.epochs {
		loss, err := tr.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, loss)
	}
	m, err := tr.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	return out, m
}

// TestSyncMatchesSingleProcess trains Cora on 2 graph-server and 2 parameter-server processes
// in synchronous mode and compares the loss of every epoch with the single-process trainer's.
func TestSyncMatchesSingleProcess(t *testing.T) {
	o := coraOptions(40)
	o.evalEvery = 40
	syncMatchesSingleProcess(t, o, 2)
}

// TestGATSyncMatchesSingleProcess is TestSyncMatchesSingleProcess for a GAT of the paper's
// shape (8 heads of 8 features, dropout 0.6 on inputs and attention coefficients) with 3
// parameter servers, so that a layer's tensors lie on different shards.
func TestGATSyncMatchesSingleProcess(t *testing.T) {
	o := coraOptions(30)
	o.model, o.hidden, o.heads, o.dropout, o.lr = "gat", 8, 8, 0.6, 0.005
	o.evalEvery = 10
	syncMatchesSingleProcess(t, o, 3)
}

// coraPartitions writes Cora cut into 2 partitions by the default (multilevel) method into a
// temporary folder and returns it. The cut renumbers the vertices; the files keep their
// original ids, which key the dropout masks, so the servers draw the masks of the
// single-process trainer the tests compare with.
func coraPartitions(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := partition.Cut(context.Background(), "cora", dir, 2, partition.DefaultMethod, io.Discard); err != nil {
		t.Fatal(err)
	}
	return dir
}

// syncMatchesSingleProcess trains o on 2 graph servers and paramServers parameter servers in
// synchronous mode and checks every epoch's loss against the single-process trainer's.
func syncMatchesSingleProcess(t *testing.T, o trainOptions, paramServers int) {
	t.Helper()
	dir := coraPartitions(t)
	stats := serverStats{rss: map[string]int64{}}
	res, err := launchOnce(context.Background(), dorylusBin, dir, dir, o, distOptions{graphServers: 2, paramServers: paramServers, staleness: jobconfig.Sync, intervals: 3, tlsDir: jobCredentials(t)},
		1, newProgress(io.Discard, o.epochs), os.Stderr, &stats)
	if err != nil {
		t.Fatal(err)
	}
	want, final := singleProcess(t, o, 1)
	if len(res.Curve) != len(want) {
		t.Fatalf("%d epochs, want %d", len(res.Curve), len(want))
	}
	worst := 0.0
	for e, r := range res.Curve {
		d := math.Abs(r.Loss-want[e]) / want[e]
		worst = math.Max(worst, d)
		if d > 1e-6 {
			t.Errorf("epoch %d: loss %.7f, single process %.7f", e+1, r.Loss, want[e])
		}
	}
	t.Logf("largest relative loss difference over %d epochs: %.2g; test accuracy %.4f", len(want), worst, res.TestAcc)
	for _, name := range []string{"graph-server 0", "graph-server 1", "param-server 0", "param-server 1"} {
		if stats.rss[name] <= 0 {
			t.Errorf("no peak RSS of %s", name)
		}
	}
	if math.Abs(res.TestAcc-final.TestAcc) > 0.002 || math.Abs(res.TrainAcc-final.TrainAcc) > 0.002 {
		t.Errorf("final evaluation: test %.4f, train %.4f; single process %.4f, %.4f", res.TestAcc, res.TrainAcc, final.TestAcc, final.TrainAcc)
	}
}

// TestAccuracyModes trains Cora through `dorylus train --graph-servers 2 --param-servers 2`
// in sync mode and with S = 0 and S = 1 for a few seeds, a GCN and a GAT (300 epochs, no
// selection), and checks each mean test accuracy against the single-process mean (within one
// point, with slack for using so few seeds).
func TestAccuracyModes(t *testing.T) {
	if testing.Short() {
		t.Skip("trains Cora sixteen times")
	}
	const seeds = 2
	for _, m := range [][]string{{"--model", "gcn", "--eval-every", "200"}, {"--model", "gat", "--epochs", "300", "--patience", "0", "--eval-every", "300"}} {
		base := runCLI(t, append([]string{"train", "--runs", fmt.Sprint(seeds), "--output", "json"}, m...)...)
		t.Logf("%s single process: %.4f", m[1], base.TestAccuracy)
		for _, mode := range []string{"sync", "0", "1"} {
			// The distributed runs of every model and mode run side by side, once the
			// single-process baselines are in.
			t.Run(m[1]+"/staleness-"+mode, func(t *testing.T) {
				t.Parallel()
				rep := runCLI(t, append([]string{"train", "--graph-servers", "2", "--param-servers", "2", "--staleness", mode,
					"--runs", fmt.Sprint(seeds), "--output", "json"}, m...)...)
				t.Logf("%s staleness %s: %.4f ± %.4f, median epoch %.1f ms", m[1], mode, rep.TestAccuracy, rep.TestAccuracyStd, 1e3*rep.EpochSecondsMedian)
				if math.Abs(rep.TestAccuracy-base.TestAccuracy) > 0.015 || rep.Runs != seeds {
					t.Errorf("%s staleness %s: test accuracy %.4f over %d runs, single process %.4f", m[1], mode, rep.TestAccuracy, rep.Runs, base.TestAccuracy)
				}
			})
		}
	}
}

// runCLI runs the built binary and decodes its JSON report.
func runCLI(t *testing.T, args ...string) trainReport {
	t.Helper()
	cmd := exec.Command(dorylusBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dorylus %v: %v\n%s", args, err, stderr.String())
	}
	var rep trainReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("dorylus %v: %v\n%s", args, err, out)
	}
	return rep
}

// TestKilledServerIsNamed starts a parameter server and two graph servers, kills graph server
// 1 mid-run and expects graph server 0 to stop within seconds with an error naming it; then
// freezes a parameter server (SIGSTOP) in a second run and expects the same.
func TestKilledServerIsNamed(t *testing.T) {
	dir := coraPartitions(t)
	for _, victim := range []string{"graph-server 1", "param-server 0"} {
		t.Run(strings.ReplaceAll(victim, " ", "-"), func(t *testing.T) {
			servers := newLocalServers(t, 3)
			logs := servers.logs
			run := serverConfig(t, dir, servers.addrs, 2, func(c *jobconfig.RunConfig) {
				c.Training.Epochs, c.Training.EvalEvery = 100000, 100000
			})
			gs0, gs1, ps, events := servers.startRun(run)
			sc := bufio.NewScanner(events)
			for n := 0; n < 3 && sc.Scan(); n++ {
				var ev graphserver.Event
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Event != "epoch" {
					t.Fatalf("graph server 0 wrote %q", sc.Text())
				}
			}
			go func() { _, _ = io.Copy(io.Discard, events) }()
			hit := map[string]*launcher.Process{"graph-server 1": gs1, "param-server 0": ps}[victim]
			sig, name := syscall.SIGKILL, "graph server 1"
			if victim == "param-server 0" {
				sig, name = syscall.SIGSTOP, "parameter server 0"
			}
			killed := time.Now()
			if err := hit.Cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-gs0.Done():
			case <-time.After(15 * time.Second):
				t.Fatalf("graph server 0 still running 15 s after %v of %s\n%s", sig, victim, logs.w)
			}
			took := time.Since(killed)
			if sig == syscall.SIGSTOP {
				_ = hit.Cmd.Process.Signal(syscall.SIGCONT)
			}
			msg := gs0.Tail()
			t.Logf("%v of %s: graph server 0 stopped after %v: %s", sig, victim, took.Round(time.Millisecond), msg)
			if !strings.Contains(msg, name) || took > 8*time.Second {
				t.Errorf("graph server 0 stopped after %v with %q, want an error naming %s within seconds", took, msg, name)
			}
		})
	}
}

// localServers are a test's servers, each started as a process of its own on a listener of
// its own on loopback; their log, and the processes, stopped when the test ends.
type localServers struct {
	t        *testing.T
	lis      []net.Listener
	addrs    []string
	logs     *syncWriter
	exited   chan *launcher.Process
	children []*launcher.Process
}

// newLocalServers opens n listeners for servers and stops what start started, then closes
// them, when t ends.
func newLocalServers(t *testing.T, n int) *localServers {
	t.Helper()
	s := &localServers{t: t, lis: make([]net.Listener, n), addrs: make([]string, n), logs: &syncWriter{w: &strings.Builder{}},
		exited: make(chan *launcher.Process, n)}
	t.Cleanup(func() {
		s.stopAll()
		launcher.CloseAll(s.lis)
	})
	for i := range s.lis {
		var err error
		if s.lis[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		s.addrs[i] = s.lis[i].Addr().String()
	}
	return s
}

// start starts server name of dorylusBin on l, its standard output to out (nil: none).
func (s *localServers) start(name string, l net.Listener, out io.Writer, args ...string) *launcher.Process {
	c, err := launcher.StartServer(dorylusBin, name, l, out, s.logs, s.exited, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.children = append(s.children, c)
	return c
}

// startRun starts the servers of run config run, of 2 graph servers and 1 parameter server, on
// the three listeners; graph server 0's events come on events, closed when the test ends.
func (s *localServers) startRun(run string) (gs0, gs1, ps *launcher.Process, events *io.PipeReader) {
	ps = s.start("param-server 0", s.lis[2], nil, "param-server", "--config", run)
	events, eventsW := io.Pipe()
	s.t.Cleanup(func() { events.Close() })
	gs := []string{"graph-server", "--config", run}
	gs0 = s.start("graph-server 0", s.lis[0], eventsW, append(gs, "--partition", "0")...)
	gs1 = s.start("graph-server 1", s.lis[1], nil, append(gs, "--partition", "1")...)
	return gs0, gs1, ps, events
}

// stopAll stops every server started, as the launcher does.
func (s *localServers) stopAll() {
	launcher.StopAll(s.children)
	s.children = nil
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
