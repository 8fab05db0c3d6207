package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TestJobUpdateMatters checks which job updates wake a reconcile: all but a
// progress report that does not end the job.
func TestJobUpdateMatters(t *testing.T) {
	running := func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.ResourceVersion = "10"
		j.Status.Conditions = []metav1.Condition{{Type: dorylusv1alpha1.ConditionTraining, Status: metav1.ConditionTrue}}
		j.Status.Progress = &dorylusv1alpha1.Progress{Epoch: 3, ValAccuracy: dec("0.5"), CostUSD: dec("0.1")}
	}
	// report is graph server 0's next write: a new resourceVersion and
	// managed-fields entry with it.
	report := func(p dorylusv1alpha1.Progress) func(*dorylusv1alpha1.GNNTrainingJob) {
		return func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.ResourceVersion = "11"
			j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "dorylus-graph-server", Subresource: "status"}}
			j.Status.Progress = &p
		}
	}
	tests := []struct {
		name   string
		oldJob func(*dorylusv1alpha1.GNNTrainingJob)
		update []func(*dorylusv1alpha1.GNNTrainingJob)
		want   bool
	}{
		{"next epoch", nil, []func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 4, ValAccuracy: dec("0.6")})}, false},
		{"first report", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Status.Progress = nil },
			[]func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 1})}, false},
		{"training error", nil, []func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 4, FailureMessage: "loss is NaN at epoch 4"})}, true},
		{"last epoch", nil, []func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 200})}, true},
		{"target accuracy", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Training.TargetAccuracy = dec("0.8") },
			[]func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 4, ValAccuracy: dec("0.81")})}, true},
		{"below target accuracy", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Training.TargetAccuracy = dec("0.8") },
			[]func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 4, ValAccuracy: dec("0.79")})}, false},
		{"budget", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.BudgetUSD = dec("1") },
			[]func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 4, CostUSD: dec("1.0")})}, true},
		{"last epoch of a finished job", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Status.Conditions = []metav1.Condition{{Type: dorylusv1alpha1.ConditionFailed, Status: metav1.ConditionTrue}}
		}, []func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 200})}, false},
		{"spec change", nil, []func(*dorylusv1alpha1.GNNTrainingJob){func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Generation++
			j.Spec.GraphServers.NodeSelector = map[string]string{"pool": "cpu"}
		}}, true},
		{"spec change with a report", nil, []func(*dorylusv1alpha1.GNNTrainingJob){report(dorylusv1alpha1.Progress{Epoch: 4}), func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.RunPolicy.Suspend = ptr.To(true)
		}}, true},
		{"label change", nil, []func(*dorylusv1alpha1.GNNTrainingJob){func(j *dorylusv1alpha1.GNNTrainingJob) { j.Labels = map[string]string{"team": "a"} }}, true},
		{"deletion", nil, []func(*dorylusv1alpha1.GNNTrainingJob){func(j *dorylusv1alpha1.GNNTrainingJob) { j.DeletionTimestamp = &metav1.Time{} }}, true},
		{"status the operator owns", nil, []func(*dorylusv1alpha1.GNNTrainingJob){func(j *dorylusv1alpha1.GNNTrainingJob) { j.Status.Restarts = 1 }}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			oldJob := testJob(running)
			if tc.oldJob != nil {
				tc.oldJob(oldJob)
			}
			newJob := oldJob.DeepCopy()
			for _, u := range tc.update {
				u(newJob)
			}
			if got := jobUpdateMatters().Update(event.UpdateEvent{ObjectOld: oldJob, ObjectNew: newJob}); got != tc.want {
				t.Errorf("update passes: %v, want %v", got, tc.want)
			}
		})
	}
}
