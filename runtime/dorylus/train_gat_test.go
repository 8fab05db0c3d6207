package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// trainFlags runs `train` with args and returns the value every flag ended with and the output.
func trainFlags(t *testing.T, args ...string) (map[string]string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := newTrainCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(context.Background())
	flags := map[string]string{}
	for _, name := range []string{"model", "hidden", "heads", "dropout", "lr", "weight-decay", "layers", "patience", "epochs"} {
		flags[name] = cmd.Flags().Lookup(name).Value.String()
	}
	return flags, stdout.String(), err
}

func TestTrainGATUsesThePapersDefaults(t *testing.T) {
	flags, out, err := trainFlags(t, "--model", "gat", "--epochs", "30", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"hidden": "8", "heads": "8", "dropout": "0.6", "lr": "0.005", "weight-decay": "0.0005", "layers": "2", "patience": "100"}
	for k, v := range want {
		if flags[k] != v {
			t.Errorf("--%s = %s, want the GAT default %s", k, flags[k], v)
		}
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if rep["model"] != "gat" || rep["hidden"] != 8.0 || rep["heads"] != 8.0 || rep["epochs"] != 30.0 || rep["patience"] != 100.0 {
		t.Errorf("report describes the wrong run: %v", rep)
	}
	for _, r := range rep["per_run"].([]any) {
		if best := r.(map[string]any)["best_epoch"].(float64); best < 1 || best > 30 {
			t.Errorf("best-validation epoch %v of 30", best)
		}
	}
	if acc := rep["test_accuracy"].(float64); acc < 0.5 || acc > 1 {
		t.Errorf("test accuracy %v after 30 GAT epochs on Cora", acc)
	}
}

func TestTrainGATKeepsExplicitFlags(t *testing.T) {
	flags, out, err := trainFlags(t, "--model", "gat", "--hidden", "4", "--heads", "2", "--lr", "0.01", "--dropout", "0.3", "--epochs", "2")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"hidden": "4", "heads": "2", "dropout": "0.3", "lr": "0.01"}
	for k, v := range want {
		if flags[k] != v {
			t.Errorf("--%s = %s, want the value given, %s", k, flags[k], v)
		}
	}
	if !strings.HasPrefix(out, "gat cora: test accuracy") {
		t.Errorf("text output %q", out)
	}
}

func TestTrainGCNDefaultsUnchanged(t *testing.T) {
	flags, out, err := trainFlags(t, "--epochs", "2", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"model": "gcn", "hidden": "16", "dropout": "0.5", "lr": "0.01", "patience": "0"}
	for k, v := range want {
		if flags[k] != v {
			t.Errorf("--%s = %s, want the GCN default %s", k, flags[k], v)
		}
	}
	if strings.Contains(out, `"heads"`) {
		t.Errorf("a GCN report names heads:\n%s", out)
	}
}

// TestTrainGATEarlyStopping checks that a run stops after --patience epochs without progress
// and reports the kept epoch.
func TestTrainGATEarlyStopping(t *testing.T) {
	_, out, err := trainFlags(t, "--model", "gat", "--patience", "3", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Epochs int `json:"epochs"`
		PerRun []struct {
			EpochsRun int `json:"epochs_run"`
			BestEpoch int `json:"best_epoch"`
		} `json:"per_run"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	r := rep.PerRun[0]
	if rep.Epochs != 1000 || r.EpochsRun >= 1000 || r.BestEpoch < 1 || r.BestEpoch > r.EpochsRun-3 {
		t.Errorf("cap %d, ran %d epochs, kept epoch %d: want a stop well before the cap, 3 or more epochs after the kept one", rep.Epochs, r.EpochsRun, r.BestEpoch)
	}
}

func TestTrainGATRefusesBadHeads(t *testing.T) {
	_, _, err := trainFlags(t, "--model", "gat", "--heads", "0", "--epochs", "1")
	if err == nil || !strings.Contains(err.Error(), "--heads") {
		t.Errorf("error %v, want one naming --heads", err)
	}
}
