package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/internal/procmem"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// distOptions are the flags of `dorylus train` that run it on separate server processes.
type distOptions struct {
	graphServers, paramServers int
	staleness                  jobconfig.Staleness
	intervals                  int
	deadAfter                  time.Duration
	target                     float64
	backend                    backends.Options
	insecure                   bool   // plaintext gRPC, no function token (debugging)
	tlsDir                     string // the run's credentials (pkg/pki), unless insecure
}

// addDistributedFlags registers the distributed flags of `dorylus train`.
func addDistributedFlags(f *pflag.FlagSet) *distOptions {
	d := &distOptions{staleness: jobconfig.MustParseStaleness(jobconfig.DefaultStaleness)}
	f.IntVar(&d.graphServers, "graph-servers", 0, "run on this many graph-server processes (0: everything in this process)")
	f.IntVar(&d.paramServers, "param-servers", 1, "with --graph-servers: parameter-server processes (weights sharded by layer)")
	f.Var(&d.staleness, "staleness", "with --graph-servers: sync, or the staleness bound S ≥ 0 of the asynchronous pipeline")
	f.IntVar(&d.intervals, "intervals", 4, "with --graph-servers: intervals per graph server")
	f.IntVar(&d.backend.Workers, "workers", 0, "with --graph-servers: concurrent tensor tasks per graph server (0: one per interval and epoch in flight)")
	f.DurationVar(&d.backend.Latency, "inject-latency", 0, "with --graph-servers: latency added to every tensor task")
	f.DurationVar(&d.deadAfter, "dead-after", rpc.DefaultDeadAfter, "with --graph-servers: how long a server may fail its health checks before the run fails naming it")
	f.Float64Var(&d.target, "target-accuracy", 0, "with --graph-servers: stop once the validation accuracy reaches this fraction")
	f.BoolVar(&d.insecure, "insecure", false, "with --graph-servers, debugging only: plaintext gRPC between the servers instead of mutual TLS with a CA made for the run")
	d.backend.AddFlags(f)
	return d
}

func (d *distOptions) enabled() bool { return d.graphServers > 0 }

// issueCredentials makes the run's credentials, with an ephemeral CA, in work (and so removed
// with it) and has the servers use them; an insecure run has none.
func (d *distOptions) issueCredentials(work string) error {
	if d.insecure {
		return nil
	}
	b, err := pki.Issue(fmt.Sprintf("dorylus-%d", os.Getpid()))
	if err != nil {
		return err
	}
	d.tlsDir = filepath.Join(work, "credentials")
	return b.WriteDir(d.tlsDir)
}

// child is one server process started by the launcher.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   *tailWriter
	done  chan struct{}  // closed when the process has exited
	err   error          // Wait's result
	mem   procmem.Memory // the last read of its memory while it ran (launchOnce's goroutine)
}

// memorySample is how often the launcher reads its servers' memory, so that it can say what a
// server held when it died (the kernel's OOM killer sends SIGKILL).
const memorySample = 500 * time.Millisecond

// sample reads the child's memory while it runs; one that has exited keeps its last read (its
// pid may be another process's by now).
func (c *child) sample() {
	select {
	case <-c.done:
		return
	default:
	}
	if m := procmem.Read(c.cmd.Process.Pid); m.Peak > 0 {
		c.mem = m
	}
}

// died describes how the child ended, with its memory when last read.
func (c *child) died() string {
	if c.mem.Peak == 0 {
		return c.err.Error()
	}
	return fmt.Sprintf("%v; resident %d MiB when last read, peak %d MiB", c.err, c.mem.Resident>>20, c.mem.Peak>>20)
}

// serverStats are what the launcher learns of its servers.
type serverStats struct {
	rss   map[string]int64 // peak RSS per server
	bytes []float64        // bytes between graph servers, per epoch
}

// runDistributed runs `dorylus train` on real graph-server and parameter-server processes on
// loopback and prints the same report as the single-process path.
func runDistributed(ctx context.Context, o trainOptions, d distOptions, stdout, stderr io.Writer) error {
	switch {
	case d.paramServers < 1:
		return fmt.Errorf("--param-servers %d: want at least 1", d.paramServers)
	case d.intervals < 1:
		return fmt.Errorf("--intervals %d: want at least 1", d.intervals)
	}
	if err := d.backend.Validate(); err != nil {
		return err
	}
	if _, err := d.backend.ForGraphServer(0, d.graphServers); err != nil {
		return err
	}
	if d.backend.Kind == jobconfig.BackendKnative && d.backend.KnativeTokenFile == "" && !d.insecure {
		return fmt.Errorf("--backend knative: --knative-token-file is required (the token the function's --token-file holds), or --insecure for a function serving without one")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the dorylus binary: %w", err)
	}
	start := time.Now()
	local, err := source.Fetch(ctx, o.source, source.Options{}) // S3 settings from the SDK's environment
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "dorylus-train-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := d.issueCredentials(work); err != nil {
		return err
	}
	dir, m, err := trainPartitions(local, work, d.graphServers)
	if err != nil {
		return err
	}
	rep := trainReport{
		Dataset: m.Dataset, Model: o.model, Nodes: m.Nodes, Edges: m.Edges, Features: m.Features,
		Classes: m.Classes, Layers: o.layers, Hidden: o.hidden, Epochs: o.epochs, Patience: o.patience, Runs: o.runs,
		Threads: tensor.Threads(), LoadSeconds: time.Since(start).Seconds(),
	}
	if o.model == "gat" {
		rep.Heads = o.heads
	}
	fmt.Fprintf(stderr, "dataset %s: %d nodes, %d directed edges, %d features, %d classes; partitions in %s (%s): %v\n",
		m.Dataset, rep.Nodes, rep.Edges, rep.Features, rep.Classes, dir, m.Method, m.Quality)
	progress := newProgress(stderr, o.epochs*o.runs)
	var times []float64
	stats := serverStats{rss: map[string]int64{}}
	var wall time.Duration
	var usage []backends.Usage
	var usageErr error // a graph server's usage file is missing: no cost estimate
	for r := range o.runs {
		seed := o.seed + uint64(r)
		t0 := time.Now()
		res, err := launchOnce(ctx, exe, dir, work, o, d, seed, progress, stderr, &stats)
		if err != nil {
			progress.finish()
			return err
		}
		wall += time.Since(t0)
		if o.trace != "" && r == 0 {
			f, err := mergeTraces(work, d.graphServers)
			if err != nil {
				return err
			}
			if rep.Trace, err = finishTrace(o.trace, f, stderr); err != nil {
				return err
			}
		}
		u, err := readUsage(work, seed, d.graphServers)
		if err != nil && usageErr == nil {
			usageErr = err
		}
		usage = append(usage, u...)
		for _, c := range res.Curve {
			times = append(times, c.Seconds)
		}
		rep.PerRun = append(rep.PerRun, res)
	}
	progress.finish()
	rep.summarize(times)
	var names []string
	rep.PeakRSSByProcess = stats.rss
	for name, rss := range stats.rss {
		rep.PeakRSSBytes = max(rep.PeakRSSBytes, rss)
		names = append(names, fmt.Sprintf("%s %d MiB", name, rss>>20))
	}
	slices.Sort(names)
	fmt.Fprintf(stderr, "peak RSS: %s; bytes between graph servers per epoch: median %.0f\n", strings.Join(names, ", "), median(stats.bytes))
	if usageErr != nil {
		fmt.Fprintf(stderr, "dorylus train: no cost estimate: %v\n", usageErr)
	} else if b, err := o.cost.distributed(wall, d, usage); err != nil {
		return err
	} else {
		reportCost(&rep, b, stderr)
	}
	return o.writeReport(rep, fmt.Sprintf(" on %d graph servers (%v)", d.graphServers, d.staleness), stdout)
}

// launchOnce trains one seed on the partitions in data: it writes the run config and the
// usage files into work, starts the servers, follows graph server 0's progress, and stops
// every server, whatever happens.
func launchOnce(ctx context.Context, exe, data, work string, o trainOptions, d distOptions, seed uint64, p *progress, stderr io.Writer, stats *serverStats) (res runResult, err error) {
	n, m := d.graphServers, d.paramServers
	lis := make([]net.Listener, n+m)
	addrs := make([]string, n+m)
	for i := range lis {
		if lis[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			closeAll(lis)
			return res, fmt.Errorf("listen on loopback: %w", err)
		}
		addrs[i] = lis[i].Addr().String()
	}
	defer closeAll(lis)
	var children []*child
	defer func() {
		for _, c := range children {
			c.sample()
			stats.rss[c.name] = max(stats.rss[c.name], c.mem.Peak)
		}
		stopAll(children)
	}()
	exited := make(chan *child, n+m)
	cfg, err := o.runConfig(&d, data, seed, addrs[:n], addrs[n:])
	if err != nil {
		return res, err
	}
	path := filepath.Join(work, fmt.Sprintf("run-%d.json", seed))
	if err := writeConfig(path, cfg); err != nil {
		return res, err
	}
	for s := range m {
		c, err := startChild(exe, fmt.Sprintf("param-server %d", s), lis[n+s], nil, stderr, exited, "param-server", "--config", path, "--shard", strconv.Itoa(s),
			"--advertise-address", addrs[n+s])
		if err != nil {
			return res, err
		}
		children = append(children, c)
	}
	events, eventsW := io.Pipe()
	defer events.Close()
	for q := range n {
		var out io.Writer
		if q == 0 {
			out = eventsW
		}
		args := []string{"graph-server", "--config", path, "--partition", strconv.Itoa(q), "--usage-file", usagePath(work, seed, q),
			"--advertise-address", addrs[q]}
		if o.trace != "" && seed == o.seed {
			args = append(args, "--trace", serverTracePath(work, q))
		}
		c, err := startChild(exe, fmt.Sprintf("graph-server %d", q), lis[q], out, stderr, exited, args...)
		if err != nil {
			return res, err
		}
		children = append(children, c)
	}
	closeAll(lis) // the children hold the sockets now
	lines := make(chan graphserver.Event)
	decodeErr := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		sc := bufio.NewScanner(events)
		for sc.Scan() {
			var ev graphserver.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				decodeErr <- fmt.Errorf("graph-server 0 wrote %q: %w", sc.Text(), err)
				return
			}
			select {
			case lines <- ev:
			case <-stop:
				return
			}
		}
	}()
	res.Seed = seed
	tick := time.NewTicker(memorySample)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			for _, c := range children {
				c.sample()
			}
		case ev := <-lines:
			switch ev.Event {
			case graphserver.EventEpoch:
				if len(res.Curve) == 0 {
					res.ResumedFrom = ev.Epoch - 1 // resumed from a checkpoint when > 0
					// The servers hold their buffers now: a first read, so that one killed
					// before the first tick (a short run) is reported with its memory too.
					for _, c := range children {
						c.sample()
					}
				}
				val := math.NaN()
				if ev.ValAcc != nil {
					val = *ev.ValAcc
				}
				res.Curve = append(res.Curve, epochRecord{Epoch: ev.Epoch, Loss: ev.Loss, ValAcc: val, Seconds: ev.Seconds})
				res.FinalLoss = ev.Loss
				stats.bytes = append(stats.bytes, float64(ev.Bytes))
				p.epoch(seed, ev.Epoch, o.epochs, ev.Loss, val, ev.Seconds)
			case graphserver.EventResult:
				res.BestEpoch, res.EpochsRun = ev.Selected, ev.Epoch
				res.accuracies(ev)
				if o.outputs.location == "" || seed != o.seed {
					return res, nil
				}
			case graphserver.EventExported:
				res.accuracies(ev) // of the weights exported: the result's, or an inference's
				fmt.Fprintf(stderr, "wrote %d files to %s\n", ev.Files, o.outputs.location)
				return res, nil
			}
		case err := <-decodeErr:
			return res, err
		case c := <-exited:
			c = exitCause(c, exited)
			return res, fmt.Errorf("%s exited before the run finished (%s)%s", c.name, c.died(), c.log.tail())
		case <-ctx.Done():
			return res, fmt.Errorf("training stopped (seed %d): %w", seed, ctx.Err())
		}
	}
}

// accuracies sets the accuracies an event reports.
func (res *runResult) accuracies(ev graphserver.Event) {
	res.TestAcc, res.TrainAcc = ev.TestAcc, ev.TrainAcc
	if ev.ValAcc != nil {
		res.ValAcc = *ev.ValAcc
	}
}

// writeConfig writes a run config to path, as the operator's ConfigMap holds it.
func writeConfig(path string, c *jobconfig.RunConfig) error {
	data, err := jobconfig.Marshal(c)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// exitSettle is how long the launcher waits, after a server exits, for another that a signal
// killed: the peers of a killed server exit too, often first, when its connections reset.
const exitSettle = 500 * time.Millisecond

// exitCause returns, of first (the first server to exit) and those exiting within exitSettle
// after it, the first a signal killed, else first: the cause, not a peer that exited
// because of it.
func exitCause(first *child, exited <-chan *child) *child {
	if signaled(first.err) {
		return first
	}
	timer := time.NewTimer(exitSettle)
	defer timer.Stop()
	for {
		select {
		case c := <-exited:
			if signaled(c.err) {
				return c
			}
		case <-timer.C:
			return first
		}
	}
}

// signaled reports whether err is the exit of a process a signal killed.
func signaled(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// startChild starts `exe args...` serving on lis (inherited as fd 3), with its standard
// output to out (discarded if nil), its standard error to stderr prefixed by its name, and in
// its own process group, so that a terminal's Ctrl-C reaches only the launcher, which stops
// it. It stops by itself when its standard input closes (the launcher exiting, even killed).
func startChild(exe, name string, lis net.Listener, out, stderr io.Writer, exited chan<- *child, args ...string) (*child, error) {
	f, err := lis.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer f.Close()
	cmd := exec.Command(exe, append(args, "--listen-fd", "3", "--stop-on-stdin-eof")...)
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &child{name: name, cmd: cmd, log: &tailWriter{prefix: "[" + name + "] ", out: stderr}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, c.log
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = cmd.Wait()
		if w, ok := out.(*io.PipeWriter); ok {
			w.Close()
		}
		close(c.done)
		exited <- c
	}()
	return c, nil
}

// stopAll closes every child's standard input, which stops it, and kills the process groups
// of those still running after five seconds; it returns once all have exited.
func stopAll(children []*child) {
	for _, c := range children {
		c.stdin.Close()
	}
	deadline := time.After(5 * time.Second)
	for _, c := range children {
		select {
		case <-c.done:
		case <-deadline:
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) // its group may be gone already
			<-c.done
		}
	}
}

func closeAll(lis []net.Listener) {
	for _, l := range lis {
		if l != nil {
			l.Close()
		}
	}
}

// tailWriter forwards a child's log lines with a prefix and keeps the last few.
type tailWriter struct {
	mu     sync.Mutex
	prefix string
	out    io.Writer
	buf    []byte
	last   []string
}

// Write implements io.Writer.
func (w *tailWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, line)
		if w.last = append(w.last, line); len(w.last) > 5 {
			w.last = w.last[1:]
		}
	}
	return len(b), nil
}

// tail returns the last lines the child wrote, for an error message.
func (w *tailWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return ""
	}
	return ": " + strings.Join(w.last, "; ")
}

// usagePath is the --usage-file of graph server q in a run of dorylus train.
func usagePath(dir string, seed uint64, q int) string {
	return filepath.Join(dir, fmt.Sprintf("usage-%d-%d.json", seed, q))
}

// readUsage reads the usage files of the n graph servers of a run of dorylus train.
func readUsage(dir string, seed uint64, n int) ([]backends.Usage, error) {
	out := make([]backends.Usage, n)
	for q := range out {
		data, err := os.ReadFile(usagePath(dir, seed, q))
		if err != nil {
			return nil, fmt.Errorf("usage of graph server %d: %w", q, err)
		}
		if err := json.Unmarshal(data, &out[q]); err != nil {
			return nil, fmt.Errorf("usage of graph server %d: %s: %w", q, usagePath(dir, seed, q), err)
		}
	}
	return out, nil
}
