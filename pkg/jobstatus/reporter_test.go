package jobstatus

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestProgressObject(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.FixedZone("X", 3600))
	ckpt := 10
	tests := []struct {
		name string
		in   Progress
		want map[string]any
	}{
		{"full report", Progress{Epoch: 12, Loss: 0.6931471805599453, TrainAccuracy: 0.95, ValAccuracy: 0.8123, TestAccuracy: 0.80556,
			CostUSD: 0.0123, EpochCostUSD: 2.5e-4, TensorCalls: 120, LocalTensorTasks: 48, LastCheckpointEpoch: &ckpt, GraphServerPeakMemoryBytes: 3 << 30}, map[string]any{
			"epoch": int64(12), "updateTime": "2026-05-06T06:08:09Z", "loss": "0.693147", "trainAccuracy": "0.9500",
			"valAccuracy": "0.8123", "testAccuracy": "0.8056", "costUSD": "0.0123", "epochCostUSD": "0.00025", "lastCheckpointEpoch": int64(10),
			"graphServerPeakMemory": "3Gi", "tensorCalls": int64(120), "localTensorTasks": int64(48),
		}},
		{"every task local: no calls written", Progress{Epoch: 2, LocalTensorTasks: 7}, map[string]any{
			"epoch": int64(2), "updateTime": "2026-05-06T06:08:09Z", "loss": "0", "trainAccuracy": "0.0000",
			"valAccuracy": "0.0000", "testAccuracy": "0.0000", "costUSD": "0", "epochCostUSD": "0", "localTensorTasks": int64(7),
		}},
		{"outputs written", Progress{Epoch: 3, Outputs: []string{"model.safetensors", "model.json"}}, map[string]any{
			"epoch": int64(3), "updateTime": "2026-05-06T06:08:09Z", "loss": "0", "trainAccuracy": "0.0000",
			"valAccuracy": "0.0000", "testAccuracy": "0.0000", "costUSD": "0", "epochCostUSD": "0", "outputs": []any{"model.safetensors", "model.json"},
		}},
		{"tiny loss and cost use an exponent the API accepts", Progress{Epoch: 1, Loss: 1.5e-9, CostUSD: 2.5e-6}, map[string]any{
			"epoch": int64(1), "updateTime": "2026-05-06T06:08:09Z", "loss": "1.5e-09", "trainAccuracy": "0.0000",
			"valAccuracy": "0.0000", "testAccuracy": "0.0000", "costUSD": "2.5e-06", "epochCostUSD": "0",
		}},
		{"NaN loss becomes a failure naming the epoch", Progress{Epoch: 7, Loss: math.NaN(), ValAccuracy: 0.5}, map[string]any{
			"epoch": int64(7), "updateTime": "2026-05-06T06:08:09Z", "trainAccuracy": "0.0000",
			"valAccuracy": "0.5000", "testAccuracy": "0.0000", "costUSD": "0", "epochCostUSD": "0", "failureMessage": "loss is NaN at epoch 7",
		}},
		{"the caller's failure message wins", Progress{Epoch: 7, Loss: math.Inf(1), FailureMessage: "NaN in layer 1 AV"}, map[string]any{
			"epoch": int64(7), "updateTime": "2026-05-06T06:08:09Z", "trainAccuracy": "0.0000",
			"valAccuracy": "0.0000", "testAccuracy": "0.0000", "costUSD": "0", "epochCostUSD": "0", "failureMessage": "NaN in layer 1 AV",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := progressObject(tc.in, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("progress (-want +got):\n%s", diff)
			}
		})
	}
	for _, p := range []Progress{{Epoch: 1, CostUSD: -1}, {Epoch: 1, TensorCalls: -1}, {Epoch: 1, LocalTensorTasks: -2}} {
		if _, err := progressObject(p, now); !errors.Is(err, ErrNegative) {
			t.Errorf("%+v: got %v, want ErrNegative", p, err)
		}
	}
}

// TestReported reads the cost and the tensor task counts back from a job's status: each where
// it is, 0 where it is not, and nothing at all when one is malformed.
func TestReported(t *testing.T) {
	progress := func(p map[string]any) map[string]any { return map[string]any{"status": map[string]any{"progress": p}} }
	tests := []struct {
		name string
		job  map[string]any
		want Progress
		bad  bool
	}{
		{"all three", progress(map[string]any{"costUSD": "0.25", "tensorCalls": int64(96), "localTensorTasks": int64(32), "epoch": int64(3)}),
			Progress{CostUSD: 0.25, TensorCalls: 96, LocalTensorTasks: 32}, false},
		{"every task local", progress(map[string]any{"costUSD": "0.5", "localTensorTasks": int64(7)}), Progress{CostUSD: 0.5, LocalTensorTasks: 7}, false},
		{"no status", map[string]any{}, Progress{}, false},
		{"a cost that is no number", progress(map[string]any{"costUSD": "cheap", "tensorCalls": int64(1)}), Progress{}, true},
		{"calls that are no integer", progress(map[string]any{"costUSD": "0.5", "tensorCalls": "many"}), Progress{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reported(tc.job)
			if (err != nil) != tc.bad {
				t.Fatalf("error %v, want one: %v", err, tc.bad)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reported (-want +got):\n%s", diff)
			}
		})
	}
}
