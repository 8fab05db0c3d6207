package controllers

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver/harness"
)

// TestBudgetFromTheGraphServers trains a job's run on graph and parameter servers in this
// process (the cpu backend), priced by the run config the operator resolved, with graph
// server 0 reporting into the job's status: the operator fails the job with reason
// BudgetExceeded on the report of the epoch whose cost reached the budget.
func TestBudgetFromTheGraphServers(t *testing.T) {
	needEnv(t)
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failed := make(chan *dorylusv1alpha1.GNNTrainingJob, 1)
	go func() { // stop the servers once the operator has failed the job
		defer cancel()
		for ctx.Err() == nil {
			var j dorylusv1alpha1.GNNTrainingJob
			err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "spend"}, &j)
			if err == nil && meta.IsStatusConditionTrue(j.Status.Conditions, dorylusv1alpha1.ConditionFailed) {
				failed <- &j
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// 20 ms per tensor task makes an epoch last longer than a status write.
	res, _ := harness.Run(ctx, harness.Options{Dataset: d, GraphServers: 1, ParamServers: 1, Timeout: time.Minute,
		Backend: func(int) (dispatch.Backend, error) {
			return cpu.New(cpu.Options{Workers: 4, Latency: 20 * time.Millisecond})
		},
		Train: graphserver.Config{Intervals: 2, Layers: 2, Hidden: 16, Dropout: 0.5, LearningRate: 0.01, Epochs: cfg.Training.Epochs,
			Seed: 1, Sync: true, EvalEvery: cfg.Training.Epochs, Cost: cfg.CostRun(), Status: reporter}})
	var j *dorylusv1alpha1.GNNTrainingJob
	select {
	case j = <-failed:
	default:
		t.Fatalf("the job did not fail; %d epochs trained", len(res.Epochs))
	}
	c := meta.FindStatusCondition(j.Status.Conditions, dorylusv1alpha1.ConditionFailed)
	if len(res.Epochs) < 2 {
		t.Fatalf("%d epochs trained, want 2 or more to tell an epoch's cost", len(res.Epochs))
	}
	// costAt is the cost at the end of epoch i+1, past the epochs trained extrapolated by the
	// dearest epoch: graph server 0 prices the run between epochs too (servers are billed by
	// the second), so the budget may be reached in an epoch that the stop cut short.
	last, dearest := res.Epochs[len(res.Epochs)-1].CostUSD, 0.0
	for i := 1; i < len(res.Epochs); i++ {
		dearest = max(dearest, res.Epochs[i].CostUSD-res.Epochs[i-1].CostUSD)
	}
	costAt := func(i int) float64 {
		if i < len(res.Epochs) {
			return res.Epochs[i].CostUSD
		}
		return last + float64(i-len(res.Epochs)+1)*dearest
	}
	first := 0 // the first epoch that reached the budget
	for first <= len(res.Epochs) && !cfg.CostRun().Over(costAt(first)) {
		first++
	}
	if first > len(res.Epochs) {
		t.Fatalf("budget $%s: not reached within an epoch of the %d epochs trained (cost $%g)", budget, len(res.Epochs), last)
	}
	// The operator decided on a cost at least the budget and at most that epoch's, or, within
	// one epoch, the next one's.
	limit := costAt(first + 1)
	var decided float64
	var said string
	if _, err := fmt.Sscanf(c.Message, "cost %g USD reached spec.runPolicy.budgetUSD %s", &decided, &said); err != nil ||
		c.Reason != dorylusv1alpha1.ReasonBudgetExceeded || said != budget || !cfg.CostRun().Over(decided) || decided > limit*(1+1e-5) {
		t.Errorf("Failed %s: %q, want BudgetExceeded at a cost from the budget $%s to $%g (epochs %d, %d; %v)", c.Reason, c.Message, budget, limit, first+1, first+2, err)
	}
	t.Logf("budget $%s reached at epoch %d; %s; %d epochs trained", budget, first+1, c.Message, len(res.Epochs))
}
