package main

import (
	"bytes"
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
