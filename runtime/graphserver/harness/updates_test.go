package harness_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// TestUpdateGranularity trains a GCN asynchronously (S = 1) on 2 graph servers of 4 intervals
// and a parameter server at every granularity, and reads the parameter server's newest weight
// version — the updates its pushes over gRPC made, one each: an update every epoch is exactly
// one push (of every layer) per graph server per epoch, every 3 intervals two (of 3 and 1),
// every interval four.
func TestUpdateGranularity(t *testing.T) {
	const epochs, graphServers = 5, 2
	for _, c := range []struct {
		every    jobconfig.UpdateEvery
		perEpoch int // pushes of one graph server
	}{{jobconfig.UpdateEvery{}, 1}, {jobconfig.UpdateIntervals(3), 2}, {jobconfig.UpdateIntervals(1), 4}} {
		t.Run(c.every.String(), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			cfg := gcnConfig(epochs)
			cfg.Intervals, cfg.Staleness, cfg.UpdateEvery, cfg.Metrics = 4, jobconfig.Bounded(1), c.every, reg
			train(t, cfg, graphServers, 1)
			want := float64(epochs * graphServers * c.perEpoch)
			for shard, v := range versions(t, reg) {
				if v != want {
					t.Errorf("parameter server %s: version %v after %d epochs, want %v", shard, v, epochs, want)
				}
			}
		})
	}
}

// versions returns the newest weight version of every parameter server registered in reg, by
// shard; it fails unless there is one.
func versions(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "dorylus_param_server_weight_version" {
			continue
		}
		for _, m := range f.Metric {
			out[label(m, "shard")] = m.GetGauge().GetValue()
		}
	}
	if len(out) != 1 {
		t.Fatalf("weight versions of %d parameter servers, want 1: %v", len(out), out)
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestUpdateEveryEpochStashes trains a GCN asynchronously (S = 1, the backward pass of an epoch
// beside the next forward pass) on one graph server summing its 4 intervals into one update an
// epoch, and reads the trace: every interval's AV and ∇AV of an epoch use one version, the one
// its epoch pinned (weight stashing), and that version counts epochs — e-1 or e at epoch e ≥ 1
// (S = 1 lets an interval start epoch e once every interval has finished e-2), never a version
// an interval's own push made.
func TestUpdateEveryEpochStashes(t *testing.T) {
	const epochs = 8
	cfg := gcnConfig(epochs)
	cfg.Intervals, cfg.Staleness = 4, jobconfig.Bounded(1)
	cfg.Trace = trace.New(0, 1<<12)
	train(t, cfg, 1, 1)
	pinned := map[[2]int32]int32{} // (interval, epoch) → version
	seen := map[trace.Kind]int{}
	for _, sp := range cfg.Trace.Spans() {
		if (sp.Kind != trace.AV && sp.Kind != trace.BackAV) || sp.Version < 0 { // the loss (AV_L) uses no weights
			continue
		}
		seen[sp.Kind]++
		key := [2]int32{sp.Interval, sp.Epoch}
		v, ok := pinned[key]
		switch {
		case !ok:
			pinned[key] = sp.Version
		case v != sp.Version:
			t.Errorf("interval %d, epoch %d: %v uses version %d, another task of the epoch %d", sp.Interval, sp.Epoch, sp.Kind, sp.Version, v)
		}
	}
	if len(pinned) != 4*epochs || seen[trace.AV] == 0 || seen[trace.BackAV] == 0 {
		t.Fatalf("versions of %d interval epochs (%v), want %d", len(pinned), seen, 4*epochs)
	}
	for key, v := range pinned {
		e := key[1]
		if lo := max(e-1, 0); v < lo || v > e {
			t.Errorf("interval %d, epoch %d pinned version %d, want %s", key[0], e, v, fmt.Sprintf("%d to %d", lo, e))
		}
	}
}
