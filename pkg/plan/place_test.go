package plan

import (
	"math"
	"testing"
	"time"
)

// TestPlacing weighs tasks with the shipped calibration and 20 ms a call (the injected latency
// of hack/bench/latency-hiding.sh): an output layer of 15 columns on an interval of Coauthor
// CS's (1146 rows of 16) costs less in the graph server, the first layer of R-MAT 1M/20M/128's
// (62 500 dense rows of 128 features) more; a function's call adds the calibrated overhead per
// call and per byte; the local side is the compute of every interval on the server's cores.
func TestPlacing(t *testing.T) {
	p := Placing{Cal: Default(), Latency: 20 * time.Millisecond, Intervals: 8, Cores: 2}
	small := Task{Rows: 1146, In: 16, Out: 15}
	big := Task{Rows: 62500, In: 128, Out: 16, First: true, Backward: true}
	if !p.Local(small) {
		l, r := p.Costs(small)
		t.Errorf("output layer of 16 → 15 columns: local %.3g s, remote %.3g s: want local", l, r)
	}
	if p.Local(big) {
		l, r := p.Costs(big)
		t.Errorf("first layer of 128 → 16 on 62 500 rows: local %.3g s, remote %.3g s: want remote", l, r)
	}
	l, r := p.Costs(big)
	c, bytes := big.work(p.Cal)
	if math.Abs(l-4*c) > 1e-12 || math.Abs(r-(0.020+c)) > 1e-12 || c <= 0 {
		t.Errorf("costs %g, %g of a task of %g core-seconds: want 8 intervals on 2 cores and one call of 20 ms", l, r, c)
	}
	f := p
	f.Function = true
	if _, fr := f.Costs(big); math.Abs(fr-r-(p.Cal.CallSeconds+p.Cal.CallCoreSeconds+bytes*p.Cal.CallByteSeconds)) > 1e-12 {
		t.Errorf("a function's call costs %g, the cpu backend's %g: want the calibrated overhead of %g bytes more", fr, r, bytes)
	}
	// ∇AV above the first layer also computes and returns dH
	back := small
	back.Backward = true
	if cb, bb := back.work(p.Cal); cb <= 0 || bb <= 0 {
		t.Errorf("∇AV: %g s, %g bytes", cb, bb)
	} else if cf, bf := small.work(p.Cal); cb <= cf || bb <= bf {
		t.Errorf("∇AV %g s, %g bytes; AV %g s, %g bytes: want more", cb, bb, cf, bf)
	}
}
