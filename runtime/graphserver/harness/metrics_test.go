package harness_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/dorylus-gnn/dorylus/internal/scrape"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
)

// families reads the series served at url.
func families(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := scrape.Families(url)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the value of family name's series with labels (key, value pairs), and
// whether it exists; a histogram's is its count.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsScraped trains on two graph servers with the knative backend (a real function
// handler over HTTP), serves the registry of the graph and parameter servers over HTTP,
// scrapes it and the function's /metrics, and checks the series against the run's progress
// lines and the function's own count.
func TestMetricsScraped(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	c := gcnConfig(3)
	c.Intervals = 2
	c.Cost, _ = costRun(2, cost.Knative)
	c.Metrics = reg
	run := trainOnFunction(t, c, nil)
	h, res := run.h, run.res
	fams := families(t, srv.URL)
	last := res.Epochs[len(res.Epochs)-1]
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"dorylus_run_epoch", nil, float64(c.Epochs)},
		{"dorylus_run_loss", nil, last.Loss},
		{"dorylus_run_epoch_seconds", nil, last.Seconds},
		{"dorylus_run_epoch_cost_usd", nil, last.EpochCostUSD},
		{"dorylus_run_cost_usd", nil, res.Final.CostUSD},
		{"dorylus_run_val_accuracy", nil, *res.Final.ValAcc},
		{"dorylus_run_test_accuracy", nil, res.Final.TestAcc},
		{"dorylus_graph_server_task_seconds", []string{"partition", "0", "kind", "WU"}, float64(c.Intervals * c.Epochs)},
		{"dorylus_graph_server_task_seconds", []string{"partition", "1", "kind", "WU"}, float64(c.Intervals * c.Epochs)},
		{"dorylus_tensor_backend_calls_in_flight", []string{"partition", "1"}, 0},
		{"dorylus_param_server_weight_version", []string{"shard", "0"}, float64(c.Epochs)}, // sync: one update an epoch
	} {
		got, ok := value(fams, w.name, w.labels...)
		if !ok || got != w.want {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.want)
		}
	}
	calls := 0.0
	for _, p := range []string{"0", "1"} {
		n, _ := value(fams, "dorylus_tensor_backend_calls_total", "partition", p)
		calls += n
		for _, k := range []pipeline.Kind{pipeline.KindGA, pipeline.KindAV, pipeline.KindSC, pipeline.KindBackSC, pipeline.KindBackAV, pipeline.KindBackGA} {
			if n, _ := value(fams, "dorylus_graph_server_task_seconds", "partition", p, "kind", k.String()); n == 0 {
				t.Errorf("partition %s: no %v task timed", p, k)
			}
		}
		if n, _ := value(fams, "dorylus_graph_server_peer_sent_bytes_total", "partition", p); n == 0 {
			t.Errorf("partition %s sent no bytes to its peer", p)
		}
	}
	if calls != float64(h.Calls()) || int64(calls) != res.Final.Calls {
		t.Errorf("dorylus_tensor_backend_calls_total sums to %v; the function served %d, the result counts %d", calls, h.Calls(), res.Final.Calls)
	}
	fnFams := families(t, run.url+"/metrics")
	for name, want := range map[string]float64{"dorylus_function_calls_total": float64(h.Calls()), "dorylus_function_failures_total": 0,
		"dorylus_function_calls_in_flight": 0, "dorylus_function_call_seconds": float64(h.Calls())} {
		if got, ok := value(fnFams, name); !ok || got != want {
			t.Errorf("function's %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	// Every series the chart's dashboard queries is one the servers expose.
	for _, name := range dashboardSeries(t) {
		if fams[name] == nil && fnFams[name] == nil {
			t.Errorf("the dashboard queries %s, which no server exposes", name)
		}
	}
	// Synchronous mode: every Gather reads rows of its own epoch.
	for _, m := range fams["dorylus_graph_server_gather_staleness_epochs"].GetMetric() {
		if hs := m.Histogram; hs.GetSampleCount() == 0 || hs.GetSampleSum() != 0 {
			t.Errorf("gather staleness %v: want samples, all 0", hs)
		}
	}
}

// dashboardSeries returns the metric families the chart's Grafana dashboard queries.
func dashboardSeries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", "dorylus-operator", "dashboards", "dorylus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range regexp.MustCompile(`dorylus_[a-z_]+`).FindAllString(tg.Expr, -1) {
				m = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
				if m != "dorylus_dev_job_name" && !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("the dashboard queries only %v", out)
	}
	return out
}
