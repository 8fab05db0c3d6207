package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/dorylus-gnn/dorylus/internal/loopback"
	"github.com/dorylus-gnn/dorylus/internal/scrape"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// coraServers runs graph servers 0 and 1 and parameter server 0 of the Cora run config (changed
// by mutate) as processes on loopback, each with its extra flags, and waits for graph server
// 0's result; they keep serving after it until the test ends. It returns their gRPC addresses
// and the result.
func coraServers(t *testing.T, mutate func(*jobconfig.RunConfig), extra [3][]string) ([]string, graphserver.Event) {
	t.Helper()
	dir := coraPartitions(t)
	lis := make([]net.Listener, 3) // graph servers 0, 1, parameter server 0
	addrs := make([]string, 3)
	for i := range lis {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis[i], addrs[i] = l, l.Addr().String()
	}
	defer launcher.CloseAll(lis)
	run := serverConfig(t, dir, addrs, 2, mutate)
	r, w := io.Pipe()
	logs := &syncWriter{w: &strings.Builder{}}
	exited := make(chan *launcher.Process, 3)
	var children []*launcher.Process
	t.Cleanup(func() { launcher.StopAll(children) })
	for i, args := range [][]string{
		{"graph-server", "--config", run, "--partition", "0"},
		{"graph-server", "--config", run, "--partition", "1"},
		{"param-server", "--config", run, "--shard", "0"},
	} {
		var out io.Writer
		if i == 0 {
			out = w
		}
		c, err := launcher.StartServer(dorylusBin, args[0]+fmt.Sprint(i), lis[i], out, logs, exited, append(args, extra[i]...)...)
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, c)
	}
	result := make(chan graphserver.Event, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var ev graphserver.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "result" {
				result <- ev
			}
		}
	}()
	select {
	case res := <-result:
		return addrs, res
	case c := <-exited:
		t.Fatalf("%s exited: %v\n%s", c.Name, c.Err, logs.w)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no result in 2 minutes\n%s", logs.w)
	}
	return nil, graphserver.Event{}
}

// TestServersServeMetrics runs two graph servers and a parameter server as processes with
// --metrics-address, and scrapes graph server 0 and the parameter server once the run has
// its result (they keep serving): the run's series match graph server 0's result line.
func TestServersServeMetrics(t *testing.T) {
	addrs := loopback.FreeAddrs(t, 2)
	gsMetrics, psMetrics := addrs[0], addrs[1]
	_, res := coraServers(t, func(c *jobconfig.RunConfig) { c.Training.Epochs, c.Training.EvalEvery = 3, 3 },
		[3][]string{{"--metrics-address", gsMetrics}, nil, {"--metrics-address", psMetrics}})
	gs, err := scrape.Families("http://" + gsMetrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := scrape.Families("http://" + psMetrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fams map[string]*dto.MetricFamily
		name string
		want float64
	}{
		{gs, "dorylus_run_epoch", 3},
		{gs, "dorylus_run_cost_usd", res.CostUSD},
		{gs, "dorylus_run_test_accuracy", res.TestAcc},
		{ps, "dorylus_param_server_weight_version", 3},
	} {
		f := c.fams[c.name]
		if f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != c.want {
			t.Errorf("%s: %v, want one series of %v", c.name, f, c.want)
		}
	}
	for _, fams := range []map[string]*dto.MetricFamily{gs, ps} {
		if fams["go_goroutines"] == nil || fams["process_resident_memory_bytes"] == nil {
			t.Error("no Go runtime or process series")
		}
	}
	if gs["dorylus_graph_server_task_seconds"] == nil {
		t.Error("no task times")
	}
}
