package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// podCluster runs 2 graph servers and 2 parameter servers of one Cora run as separate
// processes, the way the operator's pods run them: parameter servers always resume
// from their checkpoints, and a restarted process serves at its old address (the test holds
// the listeners, as a Service would keep the name).
type podCluster struct {
	t        *testing.T
	lis      []net.Listener // graph servers 0, 1, parameter servers 0, 1
	args     [][]string
	procs    []*launcher.Process
	exited   chan *launcher.Process
	logs     *syncWriter
	children []*launcher.Process
	events   chan graphserver.Event // graph server 0's lines, across its restarts
	resumed  int                    // the first epoch graph server 0 reported after a fault
}

func newPodCluster(t *testing.T, data, ckpt string, epochs int, staleness jobconfig.Staleness) *podCluster {
	c := &podCluster{t: t, lis: make([]net.Listener, 4), procs: make([]*launcher.Process, 4), exited: make(chan *launcher.Process, 32),
		logs: &syncWriter{w: &strings.Builder{}}, events: make(chan graphserver.Event, 1024)}
	addrs := make([]string, 4)
	for i := range c.lis {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.lis[i], addrs[i] = l, l.Addr().String()
	}
	t.Cleanup(func() { launcher.StopAll(c.children); launcher.CloseAll(c.lis) })
	run := serverConfig(t, data, addrs, 2, func(rc *jobconfig.RunConfig) {
		rc.Job.Name, rc.Training.Intervals, rc.Training.Epochs, rc.Training.EvalEvery = "faults", 3, epochs, epochs
		rc.Training.Staleness = staleness
		rc.Checkpoint = &jobconfig.Checkpoint{IntervalEpochs: 10, RunID: "faults", Path: ckpt} // resumed from, as a pod does
	})
	for q := range 2 {
		c.args = append(c.args, []string{"graph-server", "--config", run, "--partition", fmt.Sprint(q)})
	}
	for s := range 2 {
		c.args = append(c.args, []string{"param-server", "--config", run, "--shard", fmt.Sprint(s)})
	}
	for i := 3; i >= 0; i-- {
		c.start(i)
	}
	return c
}

// podName names process i of a podCluster.
func podName(i int) string {
	return map[int]string{0: "graph-server 0", 1: "graph-server 1", 2: "param-server 0", 3: "param-server 1"}[i]
}

// start (re)starts process i.
func (c *podCluster) start(i int) {
	var out io.Writer
	if i == 0 {
		r, w := io.Pipe()
		out = w
		go func() {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				var ev graphserver.Event
				if err := json.Unmarshal(sc.Bytes(), &ev); err == nil {
					c.events <- ev
				}
			}
		}()
	}
	p, err := launcher.StartServer(dorylusBin, podName(i), c.lis[i], out, c.logs, c.exited, c.args[i]...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.procs[i] = p
	c.children = append(c.children, p)
}

// wait returns graph server 0's next line.
func (c *podCluster) wait() graphserver.Event {
	c.t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev := <-c.events:
			return ev
		case p := <-c.exited:
			if p.Err != nil && slices.Contains(c.procs, p) { // not one the fault stopped
				c.t.Fatalf("%s exited: %v\n%s", p.Name, p.Err, c.logs.w)
			}
		case <-timeout:
			c.t.Fatalf("no progress from graph server 0 in 2 minutes:\n%s", c.logs.w)
		}
	}
}

// down waits until process i has exited.
func (c *podCluster) down(i int) {
	c.t.Helper()
	select {
	case <-c.procs[i].Done():
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s still runs 20 s after the fault:\n%s", podName(i), c.logs.w)
	}
}

// train runs the cluster to its result; with victim ≥ 0 it SIGKILLs that process half an epoch
// after graph server 0 reports epoch killAt, restarts it, restarts the graph servers once they stopped (as
// their StatefulSet does), and returns the time from the kill to the next epoch reported.
func (c *podCluster) train(victim, killAt int) (graphserver.Event, time.Duration) {
	var again time.Duration
	var killed time.Time
	for {
		ev := c.wait()
		switch {
		case ev.Event == "result":
			return ev, again
		case victim >= 0 && ev.Epoch == killAt && killed.IsZero():
			time.Sleep(time.Duration(ev.Seconds * float64(time.Second) / 2)) // mid-epoch
			if err := c.procs[victim].Cmd.Process.Signal(syscall.SIGKILL); err != nil {
				c.t.Fatal(err)
			}
			killed = time.Now()
			c.down(victim)
			if victim >= 2 {
				c.start(victim)
			}
			c.down(0)
			c.down(1)
		drain:
			for {
				select {
				case <-c.events:
				default:
					break drain
				}
			}
			c.start(1)
			c.start(0)
		case !killed.IsZero() && again == 0:
			again, c.resumed = time.Since(killed), ev.Epoch
		}
	}
}

// TestFaultsSurvived runs a synchronous Cora training on separate server processes,
// restarted the way pods are, through three faults: a parameter server killed (the run goes on
// from the shards' common checkpoint), a graph server killed mid-epoch (from the shards' newest
// version), and the object store answering 500s while the graph servers load their partitions
// from it. Each run must end with the weights, Adam state and test accuracy of an undisturbed
// run, to 1e-5.
func TestFaultsSurvived(t *testing.T) {
	const epochs = 60
	data := coraPartitions(t)
	straight := filepath.Join(t.TempDir(), "straight")
	c := newPodCluster(t, data, straight, epochs, jobconfig.Sync)
	want, _ := c.train(-1, 0)
	launcher.StopAll(c.children) // parameter servers save epoch 60 (a checkpoint is due then anyway)
	check := func(t *testing.T, c *podCluster, got graphserver.Event, cut string) {
		t.Helper()
		launcher.StopAll(c.children)
		if math.Abs(got.TestAcc-want.TestAcc) > 0.002 || got.TestAcc == 0 { // 2 of Cora's 1000 test nodes
			t.Errorf("test accuracy %.4f, undisturbed %.4f", got.TestAcc, want.TestAcc)
		}
		sameShards(t, straight, cut, epochs)
	}
	for _, victim := range []int{3, 1} {
		t.Run(strings.ReplaceAll(podName(victim), " ", "-")+"-killed", func(t *testing.T) {
			cut := filepath.Join(t.TempDir(), "cut")
			c := newPodCluster(t, data, cut, epochs, jobconfig.Sync)
			got, again := c.train(victim, 24)
			t.Logf("SIGKILL of %s after epoch 24: training again after %v", podName(victim), again.Round(time.Millisecond))
			logs := c.logs.w.(*strings.Builder).String()
			if victim == 3 && (!strings.Contains(logs, "parameter server 1: resumed from the checkpoint of epoch 20") ||
				!strings.Contains(logs, "parameter server 0: back from version")) {
				t.Errorf("parameter server 1 did not resume from epoch 20, or 0 did not go back to it:\n%s", logs)
			}
			check(t, c, got, cut)
		})
	}
	t.Run("object-store-500s", func(t *testing.T) {
		m := minio.Start(t)
		m.Env(t)
		bucket := m.Bucket(t, "faults")
		parts, err := os.ReadDir(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range parts {
			upload(t, m, bucket, "cora/"+e.Name(), filepath.Join(data, e.Name()))
		}
		p := minio.NewFaultProxy(t, m.Endpoint)
		p.Fail = 4 // fewer than the 5 tries of one download: whichever server meets them succeeds
		t.Setenv(objstore.EnvEndpoint, p.URL)
		t.Setenv("TMPDIR", t.TempDir()) // the download cache
		cut := filepath.Join(t.TempDir(), "cut")
		c := newPodCluster(t, "s3://"+bucket+"/cora", cut, epochs, jobconfig.Sync)
		got, _ := c.train(-1, 0)
		if gets, _ := p.Seen(); gets < 4+2 {
			t.Errorf("%d object GETs through the proxy, want 4 answered 500 and then each partition", gets)
		}
		check(t, c, got, cut)
	})
}

// TestCheckpointStoreGone stops the MinIO holding a distributed run's checkpoints mid-run: the
// next checkpoint fails, and `dorylus train` must stop within seconds with an error saying
// that the run cannot go on without its checkpoints, leaving no server process behind.
func TestCheckpointStoreGone(t *testing.T) {
	m := minio.Start(t)
	m.Env(t)
	t.Setenv(objstore.EnvEndpoint, m.Endpoint)
	location := "s3://" + m.Bucket(t, "gone") + "/ckpt"
	run := startLogged(t, exec.Command(dorylusBin, distArgs(300, location, "--checkpoint-every", "5")...))
	t.Cleanup(func() { _ = run.cmd.Process.Kill() }) // exited already is fine
	run.until("epoch 30/300")
	m.Stop()
	stopped := time.Now()
	run.rest()
	err := run.cmd.Wait()
	took := time.Since(stopped)
	all := run.text()
	t.Logf("checkpoint store stopped after epoch 30: dorylus train exited after %v: %s", took.Round(time.Millisecond), run.logs[len(run.logs)-1])
	if err == nil || !strings.Contains(all, "cannot go on without its checkpoints") || took > 15*time.Second {
		t.Errorf("exit %v after %v, want an error within seconds saying the checkpoints are gone:\n%s", err, took, all)
	}
	// Every server was started with the checkpoint location on its command line.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), location) {
			t.Errorf("still running: %s", strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}
