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

// budgetUSD is a budget the cpu sample spends within seconds: its servers
// cost a few hundredths of a cent a second at the operator's default prices.
const budgetUSD = "0.0005"

// TestBudgetExceeded runs a long cpu job with a tiny budget: graph server 0
// prices the run after every epoch, and the job must end Failed with reason
// BudgetExceeded within one epoch of reaching the budget — its reported cost
// at least the budget, and over it by no more than two epochs' cost (the
// epoch that crossed it, or the next; servers are billed by wall time, so an
// epoch's increment is a little more than its epochCostUSD).
func TestBudgetExceeded(t *testing.T) {
	const name = "cora-budget"
	c := setup(t, name)
	tl := longJob(t, c, name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.BudgetUSD = ptr.To(dorylusv1alpha1.Decimal(budgetUSD))
	})
	defer tl.close()
	job := waitJob(t, c, name, "Failed", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSucceeded) {
			return false, fmt.Errorf("the job succeeded past a budget of $%s", budgetUSD)
		}
		return meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionFailed), nil
	})
	f := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionFailed)
	if f.Reason != dorylusv1alpha1.ReasonBudgetExceeded {
		t.Fatalf("Failed with reason %s (%s), want %s", f.Reason, f.Message, dorylusv1alpha1.ReasonBudgetExceeded)
	}
	p := job.Status.Progress
	if p == nil || p.CostUSD == nil || p.EpochCostUSD == nil {
		t.Fatalf("no cost in status.progress: %+v", p)
	}
	budget, _ := strconv.ParseFloat(budgetUSD, 64)
	spent, err := strconv.ParseFloat(string(*p.CostUSD), 64)
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := strconv.ParseFloat(string(*p.EpochCostUSD), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failed at epoch %d: %s; cost $%g (budget $%g), last epoch $%g", p.Epoch, f.Message, spent, budget, epoch)
	if spent < budget || spent > budget+2*epoch {
		t.Errorf("cost $%g at the failure: want at least the budget $%g and over it by at most two epochs ($%g each)", spent, budget, epoch)
	}
	tl.wait(t, msGone, 120*time.Second)
	deleteJob(t, name, tl.processes())
}
