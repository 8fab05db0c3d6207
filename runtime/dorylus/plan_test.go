package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// runPlanCommand runs dorylus plan with args and returns its standard output.
func runPlanCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newPlanCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestPlanTable(t *testing.T) {
	out, err := runPlanCommand(t, "--vertices", "100000", "--edges", "1000000", "--features", "128", "--classes", "16",
		"--hidden", "64", "--epochs", "100", "--deadline", "1h", "--top", "5")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "100 epochs within 1h0m0s, 100000 vertices, 1000000 edges") || len(lines) != 9 {
		t.Errorf("table:\n%s", out)
	}
	if !strings.HasPrefix(strings.TrimSpace(lines[3]), "*") {
		t.Errorf("the first row is not marked as the choice:\n%s", out)
	}
}

func TestPlanJSON(t *testing.T) {
	out, err := runPlanCommand(t, "--dataset", "cora", "--local", "--cores", "2", "--backends", "cpu",
		"--graph-servers", "1,2", "--intervals", "4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep planReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Options) != 2 || !rep.Best || rep.Workload.Vertices != 2708 || len(rep.Workload.Cuts) != 2 {
		t.Errorf("report: %d options, best %v, workload %+v", len(rep.Options), rep.Best, rep.Workload)
	}
	if two := rep.Workload.Cuts[2]; two.Ghosts < 1 || two.Vertices < 2708/2 {
		t.Errorf("the heaviest of 2 parts of cora: %+v", two)
	}
}

func TestPlanFlagErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "cal.json")
	if err := os.WriteFile(bad, []byte(`{"measured": "2026-12-05", "command": "x", "gatherSecondsPerMAC": 1, "featureSecondsPerMAC": 1, "flopSeconds": 1, "bytesPerSecond": 1, "elementSeconds": -1, "featureElementSeconds": 0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	size := []string{"--vertices", "1000", "--edges", "5000", "--features", "8", "--classes", "2"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"dataset and size": {append([]string{"--dataset", "cora"}, size...), "give the dataset or its size"},
		"no size":          {nil, "want at least one vertex"},
		"backend":          {append([]string{"--backends", "gpu"}, size...), `backend "gpu"`},
		"graph servers":    {append([]string{"--graph-servers", "0"}, size...), "graph servers [0]"},
		"objective":        {append([]string{"--objective", "speed"}, size...), `objective "speed"`},
		"budget":           {append([]string{"--budget", "-1"}, size...), "no negative limit"},
		"model":            {append([]string{"--model", "mlp"}, size...), `model "mlp"`},
		"calibration":      {append([]string{"--calibration", bad}, size...), "elementSeconds -1"},
		"cores":            {append([]string{"--local", "--cores", "0"}, size...), "--cores 0"},
	} {
		_, err := runPlanCommand(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
	}
}

func TestHeaviestPart(t *testing.T) {
	// 2 parts of 100 vertices and 400 entries: the heaviest weighs 1.1 of the mean
	// (500/2·1.1 = 275 entries + rows), holds 1.2 of the mean's 50 vertices, and 1.1 of the mean's
	// 15 ghosts, rounded up.
	q := plan.Part{Vertices: 60, Entries: 275, Ghosts: 17}
	if got := heaviestPart(partition.Quality{Parts: 2, Entries: 400, Balance: 1.1, VertexBalance: 1.2, Ghosts: 30}, 100); got != q {
		t.Errorf("heaviestPart = %+v, want %+v", got, q)
	}
}
