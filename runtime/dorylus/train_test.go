package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// run executes the dorylus command with args and returns its stdout and stderr.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(context.Background())
	return stdout.String(), stderr.String(), err
}

func TestTrainJSONReport(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "curves.png")
	out, logs, err := run(t, "train", "--epochs", "30", "--runs", "2", "--output", "json", "--plot", plot)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, logs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	for _, key := range []string{"dataset", "model", "epochs", "runs", "test_accuracy", "test_accuracy_std", "val_accuracy", "epoch_seconds_median", "peak_rss_bytes"} {
		if _, ok := rep[key]; !ok {
			t.Errorf("JSON output lacks %q", key)
		}
	}
	if rep["dataset"] != "cora" || rep["model"] != "gcn" || rep["epochs"] != 30.0 || rep["runs"] != 2.0 {
		t.Errorf("report describes the wrong run: %v", rep)
	}
	if acc := rep["test_accuracy"].(float64); acc < 0.5 || acc > 1 {
		t.Errorf("test accuracy %v after 30 epochs on Cora", acc)
	}
	if rep["epoch_seconds_median"].(float64) <= 0 || rep["peak_rss_bytes"].(float64) <= 0 {
		t.Errorf("timing or memory missing: %v", rep)
	}
	if !strings.Contains(logs, "seed 2 epoch 30/30") {
		t.Errorf("progress lines do not cover the second run:\n%s", logs)
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("plot is only %v", b)
	}
}

func TestTrainRefusesBadFlags(t *testing.T) {
	cases := map[string][]string{
		"--model":   {"--model", "transformer"},
		"--layers":  {"--layers", "0"},
		"--hidden":  {"--hidden", "0"},
		"--dropout": {"--dropout", "1"},
		"--lr":      {"--lr", "-1"},
		"--epochs":  {"--epochs", "0"},
		"--runs":    {"--runs", "0"},
		"--output":  {"--output", "yaml"},
		"nodes=":    {"--dataset", "rmat:nodes=x,edges=10"},
		"pubmed":    {"--dataset", "pubmed"},
		"--trace":   {"--trace", filepath.Join(t.TempDir(), "missing", "trace.json")},
		"GCN only":  {"--model", "gat", "--trace", filepath.Join(t.TempDir(), "trace.json")},
	}
	t.Setenv("DORYLUS_DATA_DIR", filepath.Join("..", "..", "datasets"))
	for want, args := range cases {
		_, _, err := run(t, append([]string{"train", "--epochs", "1"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("train %v: error %v, want one naming %q", args, err, want)
		}
	}
}

// TestTrainBoundsFlags: every numeric flag outside its range (jobconfig.Limits, the CRD's) is
// refused before anything loads, naming the flag, the value and the range, and a flag of a run
// on graph servers given without --graph-servers is refused instead of ignored.
func TestTrainBoundsFlags(t *testing.T) {
	cases := map[string][]string{
		"--graph-servers -1: want 0 (one process) or 1 to 256":                          {"--graph-servers", "-1"},
		"--graph-servers 1000: want 0 (one process) or 1 to 256":                        {"--graph-servers", "1000"},
		"--staleness 1 needs --graph-servers":                                           {"--staleness", "1"},
		"--intervals 8, --param-servers 2 need --graph-servers":                         {"--param-servers", "2", "--intervals", "8"},
		"--insecure true needs --graph-servers":                                         {"--insecure"},
		"--threads -1: want 0 (GOMAXPROCS) or 1 to 1024":                                {"--threads", "-1"},
		"--dead-after 0s: want 1s to 1h0m0s":                                            {"--graph-servers", "2", "--dead-after", "0"},
		"--hidden 2000000: want 1 to 65536":                                             {"--hidden", "2000000"},
		"--layers 17: want 1 to 16":                                                     {"--layers", "17"},
		"--heads 65: want 1 to 64":                                                      {"--model", "gat", "--heads", "65"},
		"--runs 1001: want 1 to 1000":                                                   {"--runs", "1001"},
		"--patience -1: want 0 (off) or 1 to 1000000":                                   {"--patience", "-1"},
		"--staleness 17: want 0 to 16":                                                  {"--graph-servers", "2", "--staleness", "17"},
		"--param-servers 33: want 1 to 32":                                              {"--graph-servers", "2", "--param-servers", "33"},
		"--intervals 0: want 1 to 65536":                                                {"--graph-servers", "2", "--intervals", "0"},
		"--workers -1: want 0 (one per interval and epoch in flight) or 1 to 1024":      {"--graph-servers", "2", "--workers", "-1"},
		"--target-accuracy 2: want a fraction in [0, 1]":                                {"--graph-servers", "2", "--target-accuracy", "2"},
		"--checkpoint-every 0: want 1 to 100000":                                        {"--checkpoint-dir", t.TempDir(), "--checkpoint-every", "0"},
		"--lambda-memory-mb 64: want 128 to 10240":                                      {"--lambda-memory-mb", "64"},
		`update every "0": want epoch, interval or a number of intervals in [1, 65536]`: {"--graph-servers", "2", "--staleness", "1", "--update-every", "0"},
		"--update-every interval needs an asynchronous --staleness":                     {"--graph-servers", "2", "--update-every", "interval"},
		"--update-every epoch needs --graph-servers":                                    {"--update-every", "epoch"},
	}
	for want, args := range cases {
		_, _, err := run(t, append([]string{"train", "--epochs", "1"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("train %v: error %v, want %q", args, err, want)
		}
	}
	if _, _, err := run(t, "train", "--epochs", "1", "--staleness", "sync"); err != nil {
		t.Errorf("train --staleness sync without --graph-servers (how one process trains): %v", err)
	}
}

// TestServerAndPrepareBoundsFlags: the numeric flags of prepare, graph-server and param-server
// outside their ranges (jobconfig.Limits where a run sets the same thing: a partition per graph
// server, a shard per parameter server) are refused before anything is read, naming the flag,
// the value and the range, and so are $DORYLUS_PARTITION and $DORYLUS_ATTEMPT holding something
// other than an integer (the flags' defaults); the ends of each range get past the check to
// what comes next.
func TestServerAndPrepareBoundsFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "run.json")
	cases := map[string][]string{
		"--partitions -1: want 0 (one file) or 1 to 256":   {"prepare", "--partitions", "-1", "cora", missing},
		"--partitions 257: want 0 (one file) or 1 to 256":  {"prepare", "--partitions", "257", "cora", missing},
		"--partition -1: want 0 to 255":                    {"graph-server", "--config", missing, "--partition", "-1"},
		"--partition 256: want 0 to 255":                   {"graph-server", "--config", missing, "--partition", "256"},
		"--attempt -1: want 0 to 2147483647":               {"graph-server", "--config", missing, "--attempt", "-1"},
		"--startup-timeout -1s: want 0s to 24h0m0s":        {"graph-server", "--config", missing, "--startup-timeout", "-1s"},
		"--startup-timeout 25h0m0s: want 0s to 24h0m0s":    {"graph-server", "--config", missing, "--startup-timeout", "25h"},
		"--listen-fd 2: want 0 (none) or 3 to 2147483647":  {"graph-server", "--config", missing, "--listen-fd", "2"},
		"--listen-fd -1: want 0 (none) or 3 to 2147483647": {"param-server", "--config", missing, "--listen-fd", "-1"},
		"--shard -1: want 0 to 31":                         {"param-server", "--config", missing, "--shard", "-1"},
		"--drain-timeout 500ms: want 1s to 1h0m0s":         {"graph-server", "--config", missing, "--drain-timeout", "500ms"},
		"--drain-timeout 2h0m0s: want 1s to 1h0m0s":        {"param-server", "--config", missing, "--drain-timeout", "2h"},
		"--shard 32: want 0 to 31":                         {"param-server", "--config", missing, "--shard", "32"},
	}
	for want, args := range cases {
		if _, _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want %q", args, err, want)
		}
	}
	for _, c := range []struct{ env, value string }{{jobconfig.EnvPartition, "1x"}, {jobconfig.EnvPartition, " 1"}, {jobconfig.EnvAttempt, "-"}} {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			want := fmt.Sprintf("$%s=%q: not an integer", c.env, c.value)
			if _, _, err := run(t, "graph-server", "--config", missing); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("$%s=%q: error %v, want %q", c.env, c.value, err, want)
			}
		})
	}
	for _, args := range [][]string{
		{"graph-server", "--config", missing, "--partition", "255", "--attempt", "0", "--startup-timeout", "24h", "--listen-fd", "3"},
		{"param-server", "--config", missing, "--shard", "31", "--drain-timeout", "1h"},
		{"graph-server", "--config", missing, "--drain-timeout", "1s"},
	} {
		if _, _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), ": want ") {
			t.Errorf("%v: error %v, want the missing run config's", args, err)
		}
	}
}

func TestPrepareThenTrain(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "cora.dorylus")
	if _, logs, err := run(t, "prepare", "cora", dst); err != nil {
		t.Fatalf("prepare: %v\n%s", err, logs)
	}
	text, _, err := run(t, "train", "--epochs", "20", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	bin, _, err := run(t, "train", "--epochs", "20", "--output", "json", "--dataset", dst)
	if err != nil {
		t.Fatal(err)
	}
	var a, b struct {
		TestAccuracy float64 `json:"test_accuracy"`
		ValAccuracy  float64 `json:"val_accuracy"`
	}
	if err := json.Unmarshal([]byte(text), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(bin), &b); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("the prepared dataset trains differently: text %+v, prepared %+v", a, b)
	}
}
