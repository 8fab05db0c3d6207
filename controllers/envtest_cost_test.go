package controllers

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver/harness"
)

// TestBudgetFromTheGraphServers trains a job's run on graph and parameter servers in this
// process (the cpu backend), priced by the run config the operator resolved, with graph
// server 0 reporting into the job's status: the run stops itself after the first epoch whose
// cost reached the budget, and the operator fails the job with reason BudgetExceeded at that
// epoch's cost.
func TestBudgetFromTheGraphServers(t *testing.T) {
	ns := newNamespace(t)
	// The servers cost this much a second (the suite's price list and default types).
	in := testPricing.Prices.Instances
	rate := (in[testPricing.GraphServerInstance].HourUSD + in[testPricing.ParameterServerInstance].HourUSD) / 3600
	budget := strconv.FormatFloat(2*rate, 'g', 6, 64) // two seconds of servers
	createJob(t, userJob(ns, "spend", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Epochs = 100000
		j.Spec.RunPolicy.BudgetUSD = ptr.To(dorylusv1alpha1.Decimal(budget))
	}))
	job := waitCondition(t, ns, "spend", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	cfg, err := resolveRunConfig(job, &testPricing)
	if err != nil {
		t.Fatal(err)
	}
	reporter, err := jobstatus.New(restConfig, ns, "spend")
	if err != nil {
		t.Fatal(err)
	}
	d, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 20 ms per tensor task makes an epoch last longer than a status write.
	res, err := harness.Run(context.Background(), harness.Options{Dataset: d, GraphServers: 1, ParamServers: 1, Timeout: time.Minute,
		Backend: func(int) (dispatch.Backend, error) {
			return cpu.New(cpu.Options{Workers: 4, Latency: 20 * time.Millisecond})
		},
		Train: graphserver.Config{Intervals: 2, Layers: 2, Hidden: 16, Dropout: 0.5, LearningRate: 0.01, Epochs: cfg.Training.Epochs,
			Seed: 1, Staleness: jobconfig.Sync, EvalEvery: cfg.Training.Epochs, Cost: cfg.CostRun(), Status: reporter}})
	if err != nil {
		t.Fatalf("the run: %v", err)
	}
	n := len(res.Epochs)
	if n < 2 {
		t.Fatalf("%d epochs trained, want 2 or more to tell an epoch's cost", n)
	}
	last, before := res.Epochs[n-1].CostUSD, res.Epochs[n-2].CostUSD
	run := cfg.CostRun()
	if !run.Over(last) || run.Over(before) || res.Final.Epoch != n || res.Final.CostUSD != last {
		t.Fatalf("budget $%s: the run stopped at epoch %d of %d at $%g (the epoch before: $%g), its result at epoch %d, $%g; "+
			"want it stopped after the first epoch that reached the budget, at that epoch's cost", budget, n, cfg.Training.Epochs, last, before, res.Final.Epoch, res.Final.CostUSD)
	}
	j := waitCondition(t, ns, "spend", dorylusv1alpha1.ConditionFailed, metav1.ConditionTrue, dorylusv1alpha1.ReasonBudgetExceeded)
	c := meta.FindStatusCondition(j.Status.Conditions, dorylusv1alpha1.ConditionFailed)
	var decided float64
	var said string
	if _, err := fmt.Sscanf(c.Message, "cost %g USD reached spec.runPolicy.budgetUSD %s", &decided, &said); err != nil ||
		said != budget || !run.Over(decided) || decided > last*(1+1e-5) {
		t.Errorf("Failed %s: %q, want BudgetExceeded at a cost from the budget $%s to epoch %d's $%g (%v)", c.Reason, c.Message, budget, n, last, err)
	}
	t.Logf("budget $%s reached at epoch %d; %s", budget, n, c.Message)
}
