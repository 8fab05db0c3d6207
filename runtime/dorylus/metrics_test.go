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
)

// TestServersServeMetrics runs two graph servers and a parameter server as processes with
// --metrics-address, and scrapes graph server 0 and the parameter server once the run has
// its result (they keep serving): the run's series match graph server 0's result line.
func TestServersServeMetrics(t *testing.T) {
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
	defer closeAll(lis)
	gsMetrics, psMetrics := loopback.FreeAddr(t), loopback.FreeAddr(t)
	run := serverConfig(t, dir, addrs, 2, func(c *jobconfig.RunConfig) { c.Training.Epochs, c.Training.EvalEvery = 3, 3 })
	r, w := io.Pipe()
	logs := &syncWriter{w: &strings.Builder{}}
	exited := make(chan *child, 3)
	var children []*child
	defer func() { stopAll(children) }()
	for i, args := range [][]string{
		{"graph-server", "--config", run, "--partition", "0", "--metrics-address", gsMetrics},
		{"graph-server", "--config", run, "--partition", "1"},
		{"param-server", "--config", run, "--shard", "0", "--metrics-address", psMetrics},
	} {
		var out io.Writer
		if i == 0 {
			out = w
		}
		c, err := startChild(dorylusBin, args[0]+fmt.Sprint(i), lis[i], out, logs, exited, args...)
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
	var res graphserver.Event
	select {
	case res = <-result:
	case c := <-exited:
		t.Fatalf("%s exited: %v\n%s", c.name, c.err, logs.w)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no result in 2 minutes\n%s", logs.w)
	}
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
