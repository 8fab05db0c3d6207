package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// TestResolveCost checks the run config's cost section field by field: the
// instance types a nodeSelector pins, the operator's defaults and price
// list, and the budget.
func TestResolveCost(t *testing.T) {
	spot := cost.Default
	spot.Source, spot.Instances = "spot", map[string]cost.Instance{"m5.large": {VCPUs: 2, MemoryGiB: 8, HourUSD: 0.035}, "c5.xlarge": {VCPUs: 4, MemoryGiB: 8, HourUSD: 0.07}}
	pin := func(role *dorylusv1alpha1.ServerPodSpec, typ string) {
		role.NodeSelector = map[string]string{corev1.LabelInstanceTypeStable: typ, "zone": "a"}
	}
	tests := []struct {
		name    string
		pricing Pricing
		job     func(*dorylusv1alpha1.GNNTrainingJob)
		want    *jobconfig.Cost
	}{
		{"defaults", Pricing{}, nil, &jobconfig.Cost{GraphServerInstance: "c5n.2xlarge", ParameterServerInstance: "c5.xlarge"}},
		{"node selectors pin the types, the budget is parsed", Pricing{}, func(j *dorylusv1alpha1.GNNTrainingJob) {
			pin(&j.Spec.GraphServers.ServerPodSpec, "r5.2xlarge")
			pin(&j.Spec.ParameterServers.ServerPodSpec, "m5.xlarge")
			j.Spec.RunPolicy.BudgetUSD = ptr.To[dorylusv1alpha1.Decimal]("2.5e-3")
		}, &jobconfig.Cost{GraphServerInstance: "r5.2xlarge", ParameterServerInstance: "m5.xlarge", BudgetUSD: 0.0025}},
		{"the operator's price list and default types", Pricing{Prices: spot, GraphServerInstance: "m5.large", ParameterServerInstance: "m5.large"},
			func(j *dorylusv1alpha1.GNNTrainingJob) { pin(&j.Spec.ParameterServers.ServerPodSpec, "c5.xlarge") },
			&jobconfig.Cost{Prices: &spot, GraphServerInstance: "m5.large", ParameterServerInstance: "c5.xlarge"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob()
			if tc.job != nil {
				tc.job(job)
			}
			got, err := resolveRunConfig(job, &tc.pricing)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Cost); diff != "" {
				t.Errorf("cost (-want +got):\n%s", diff)
			}
		})
	}
	job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) { pin(&j.Spec.GraphServers.ServerPodSpec, "z9.huge") })
	if _, err := resolveRunConfig(job, &Pricing{}); err == nil || !strings.Contains(err.Error(), `graph servers instance type "z9.huge": no price known`) {
		t.Errorf("an instance type without a price: %v", err)
	}
	if err := (&Pricing{GraphServerInstance: "z9.huge"}).Validate(); err == nil {
		t.Error("Validate accepted a default instance type without a price")
	}
}

// TestConfigDigestIgnoresCost: new prices or a new budget keep the pods'
// digest, any other change moves it.
func TestConfigDigestIgnoresCost(t *testing.T) {
	digest := func(pricing Pricing, f ...func(*dorylusv1alpha1.GNNTrainingJob)) string {
		cfg, err := resolveRunConfig(testJob(f...), &pricing)
		if err != nil {
			t.Fatal(err)
		}
		d, err := configDigest(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := digest(Pricing{})
	if d := digest(Pricing{GraphServerInstance: "m5.xlarge"}, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.BudgetUSD = ptr.To[dorylusv1alpha1.Decimal]("1")
	}); d != base {
		t.Errorf("digest %s moved to %s with a new price setting and budget", base, d)
	}
	if d := digest(Pricing{}, func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Training.Epochs++ }); d == base {
		t.Error("digest kept with another epoch count")
	}
}
