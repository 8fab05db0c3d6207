package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainReportsCost: the single-process report prices one instance for the run, and an
// instance type without a price is refused before training.
func TestTrainReportsCost(t *testing.T) {
	rep := runCLI(t, "train", "--epochs", "3", "--output", "json", "--instance-type", "c5.xlarge")
	if rep.Cost == nil || len(rep.Cost.Items) != 1 || rep.Cost.Items[0].Name != "trainer (1 × c5.xlarge)" || rep.CostUSD <= 0 || rep.CostUSD != rep.Cost.TotalUSD {
		t.Errorf("cost $%g, %+v: want one c5.xlarge for the run", rep.CostUSD, rep.Cost)
	}
	cmd := newRootCommand()
	cmd.SetArgs([]string{"train", "--param-server-instance-type", "z9.huge"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `--param-server-instance-type instance type "z9.huge": no price known`) {
		t.Errorf("unknown instance type: %v", err)
	}
}

// TestTrainPricesFile: --prices replaces the built-in prices it names, in the single-process
// report and in the distributed one, whose servers read them from the run config.
func TestTrainPricesFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"source": "spot test", "asOf": "2026-12-01", "instances": {"c5.xlarge": {"vcpus": 4, "memoryGiB": 8, "hourUSD": 0.05}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--graph-servers", "2"}} {
		rep := runCLI(t, append([]string{"train", "--epochs", "2", "--output", "json", "--instance-type", "c5.xlarge", "--prices", file}, args...)...)
		if rep.Cost == nil || rep.Cost.Prices != "spot test, as of 2026-12-01" || len(rep.Cost.Items) == 0 {
			t.Fatalf("%v: cost %+v", args, rep.Cost)
		}
		if it := rep.Cost.Items[0]; it.UnitUSD != 0.05 || !strings.Contains(it.Name, "c5.xlarge") {
			t.Errorf("%v: first item %+v, want c5.xlarge at the file's $0.05 an hour", args, it)
		}
	}
}
