package remote

import (
	"context"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// TestSplitMatchesWhole cuts every kind of task into row ranges under small payload limits,
// runs the parts with dispatch.Execute, assembles them as runParts does, and expects the
// whole task's result: the same rows (dropout is keyed by global row), dW and loss summed.
func TestSplitMatchesWhole(t *testing.T) {
	for _, req := range remotetest.Tasks(1, 50, 40, 8) {
		whole, err := dispatch.Execute(&req, nil)
		if err != nil {
			t.Fatal(err)
		}
		full := len(dispatch.EncodeRequest(&req))
		parts, err := split(&req, inline, full/3, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) < 3 {
			t.Fatalf("%v layer %d: %d parts under a third of the size", req.Op, req.Layer, len(parts))
		}
		got := dispatch.TaskResult{}
		if r, c, ok := outShape(&req); ok {
			got.Out = tensor.NewDense(r, c)
		}
		next := 0
		for _, p := range parts {
			if p.lo != next || len(p.body) > full/3 {
				t.Fatalf("part [%d,%d) of %d bytes after row %d", p.lo, p.hi, len(p.body), next)
			}
			next = p.hi
			decoded, err := dispatch.DecodeRequest(p.body)
			if err != nil {
				t.Fatal(err)
			}
			if got.Out != nil {
				decoded.Out = got.Out.RowSlice(p.lo, p.hi)
			}
			res, err := dispatch.Execute(&decoded, nil)
			if err != nil {
				t.Fatal(err)
			}
			got.Loss += res.Loss
			if res.DW != nil {
				if got.DW == nil {
					got.DW = tensor.NewDense(res.DW.Rows, res.DW.Cols)
				}
				for i, v := range res.DW.Data {
					got.DW.Data[i] += v
				}
			}
		}
		if next != req.NumRows() {
			t.Fatalf("parts end at row %d of %d", next, req.NumRows())
		}
		if d := remotetest.Diff(got, whole); d > 1e-5 {
			t.Errorf("%v layer %d: split result differs by %g", req.Op, req.Layer, d)
		}
	}
	req := remotetest.Tasks(1, 50, 40, 8)[0]
	if _, err := split(&req, inline, 100, 0); err == nil {
		t.Error("a limit below one row's size was accepted")
	}
	res := resultSize(&req)
	if parts, err := split(&req, inline, 0, res/2); err != nil || len(parts) < 2 {
		t.Errorf("result limit: %d parts, %v", len(parts), err)
	}
}

// TestTuner drives the tuner by hand: it grows while tasks wait, holds without a queue,
// shrinks when latency doubles, and cuts a quarter when throttled.
func TestTuner(t *testing.T) {
	k := kind{dispatch.OpForward, 0}
	tu := newTuner(1, 8, false)
	for range 10 {
		tu.done(k, 10*time.Millisecond, 3)
	}
	if tu.limit != 8 {
		t.Fatalf("limit %d after 10 quick calls with a queue, want the cap 8", tu.limit)
	}
	if th, ok := tu.threshold(k, 5, time.Millisecond); !ok || th != 50*time.Millisecond {
		t.Errorf("straggler threshold %v %v, want 5 × 10 ms", th, ok)
	}
	if th, _ := tu.threshold(k, 5, 500*time.Millisecond); th != 500*time.Millisecond {
		t.Errorf("threshold %v under the 500 ms floor", th)
	}
	for range 40 {
		tu.done(k, 30*time.Millisecond, 3)
	}
	if tu.limit >= 8 || tu.limit < 1 {
		t.Fatalf("limit %d after latency tripled, want fewer than 8", tu.limit)
	}
	low := tu.limit
	for range 40 {
		tu.done(k, 30*time.Millisecond, 0)
	}
	if tu.limit > low {
		t.Errorf("limit grew from %d to %d without a queue", low, tu.limit)
	}
	tu = newTuner(8, 8, false)
	tu.throttled()
	if tu.limit != 6 {
		t.Errorf("limit %d after a throttle from 8, want 6", tu.limit)
	}
	tu.throttled() // within the cooldown: counted once
	if tu.limit != 6 {
		t.Errorf("limit %d after a second throttle in the cooldown", tu.limit)
	}
	fixed := newTuner(4, 4, true)
	fixed.throttled()
	for range 20 {
		fixed.done(k, time.Duration(1+len(fixed.kinds))*time.Second, 5)
	}
	if fixed.limit != 4 {
		t.Errorf("fixed tuner moved to %d", fixed.limit)
	}
	if _, ok := fixed.threshold(k, 5, 0); !ok {
		t.Error("a fixed tuner keeps no latency statistics")
	}
}

// slowFirst is a transport that answers every call at once with the result of Execute,
// except that calls to endpoint "slow" take slowFor.
type slowFirst struct{ slowFor time.Duration }

func (s slowFirst) Call(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
	if endpoint == "slow" {
		select {
		case <-time.After(s.slowFor):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	req, err := dispatch.DecodeRequest(body)
	if err != nil {
		return nil, err
	}
	res, err := dispatch.Execute(&req, nil)
	if err != nil {
		return nil, err
	}
	return dispatch.EncodeResult(req.Op, res), nil
}

// TestRelaunchBeyondLimit: a straggler is relaunched even when the calls in flight fill
// MaxConcurrency (here 1), so the relaunch wins long before the slow call ends.
func TestRelaunchBeyondLimit(t *testing.T) {
	req := remotetest.Tasks(1, 20, 10, 4)[0]
	fast, err := New(slowFirst{}, Options{Endpoints: []string{"fast"}, MaxConcurrency: 1, Fixed: true})
	if err != nil {
		t.Fatal(err)
	}
	for range minSamples { // latency statistics of the task's kind
		if _, err := fast.Run(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	// the first try goes to the first of the least busy endpoints: the slow one
	b, err := New(slowFirst{slowFor: 3 * time.Second}, Options{Endpoints: []string{"slow", "fast"}, PerEndpoint: 1, MaxConcurrency: 1, Fixed: true,
		StragglerFloor: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.tune = fast.tune
	start := time.Now()
	if _, err = b.Run(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("task took %v: the relaunch waited for the straggler's slot", took)
	}
	if u := b.Usage(); u.Relaunches != 1 {
		t.Errorf("usage %+v, want one relaunch", u)
	}
}
