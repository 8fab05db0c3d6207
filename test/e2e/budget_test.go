//go:build e2e

package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// budgetUSD is what the servers of the cpu sample cost in about half a
// minute at the operator's default prices (≈ $0.0003 a second): past their
// start-up (seconds, already billed), well before 6000 epochs end.
const budgetUSD = "0.008"

// TestBudgetExceeded runs a long cpu job with a small budget: graph server 0
// prices the run after every epoch and stops it after the first whose cost
// reached the budget, reporting that epoch at once, and the job must end
// Failed with reason BudgetExceeded at that epoch's cost — at least the budget,
// and over it by less than the epoch's own cost — long before its last epoch;
// the envtest TestBudgetFromTheGraphServers checks the epochs of the
// in-process servers.
func TestBudgetExceeded(t *testing.T) {
	t.Parallel()
	const name, budget = "cora-budget", budgetUSD
	c := setup(t, name)
	tl := longJob(t, c, name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Epochs = 6000
		j.Spec.RunPolicy.BudgetUSD = ptr.To(dorylusv1alpha1.Decimal(budget))
	})
	defer tl.close()
	job := waitJob(t, c, name, "Failed", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSucceeded) {
			return false, fmt.Errorf("the job succeeded past a budget of $%s", budget)
		}
		return meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionFailed), nil
	})
	f := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionFailed)
	if f.Reason != dorylusv1alpha1.ReasonBudgetExceeded {
		t.Fatalf("Failed with reason %s (%s), want %s", f.Reason, f.Message, dorylusv1alpha1.ReasonBudgetExceeded)
	}
	var decided float64
	var said string
	if _, err := fmt.Sscanf(f.Message, "cost %g USD reached spec.runPolicy.budgetUSD %s", &decided, &said); err != nil || said != budget {
		t.Fatalf("Failed message %q: want \"cost C USD reached spec.runPolicy.budgetUSD %s\" (%v)", f.Message, budget, err)
	}
	b, _ := strconv.ParseFloat(budget, 64)
	p := job.Status.Progress
	if p == nil {
		t.Fatal("no status.progress")
	}
	var epochCost float64
	if p.EpochCostUSD != nil {
		epochCost, _ = strconv.ParseFloat(string(*p.EpochCostUSD), 64)
	}
	t.Logf("failed at epoch %d, the epoch costing $%g: %s", p.Epoch, epochCost, f.Message)
	// The status holds 6 significant digits.
	if decided < b*(1-1e-5) || decided-epochCost >= b*(1+1e-5) {
		t.Errorf("decided at cost $%g, the epoch costing $%g: want at least the budget $%g, reached in that epoch", decided, epochCost, b)
	}
	if p.Epoch >= 6000 {
		t.Errorf("failed at epoch %d: the budget did not stop the job", p.Epoch)
	}
	tl.wait(t, msGone, 120*time.Second)
	deleteJob(t, name, tl.processes())
}
