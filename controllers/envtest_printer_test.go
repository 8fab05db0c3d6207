package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestPrinterColumns reads `kubectl get gnnjob` as the API server renders
// it (the Table form): epoch, accuracy and cost from progress, Ready and
// Succeeded selected by condition type, and the estimated end.
func TestPrinterColumns(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "shown", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Training.Epochs = 9 }))
	waitCondition(t, ns, "shown", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	report(t, ns, "shown", jobstatus.Progress{Epoch: 9, ValAccuracy: 0.8125, CostUSD: 0.5})
	waitCondition(t, ns, "shown", dorylusv1alpha1.ConditionSucceeded, metav1.ConditionTrue, "")

	var table metav1.Table
	eventually(t, "table", func() error {
		var err error
		if table, err = readTable(ns); err != nil {
			return err
		}
		if len(table.Rows) != 1 || table.Rows[0].Cells[4] != "False" {
			return fmt.Errorf("rows %v", table.Rows)
		}
		return nil
	})
	var names []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			names = append(names, c.Name)
		}
	}
	if diff := cmp.Diff([]string{"Name", "Epoch", "Val-Acc", "Cost-USD", "Ready", "Succeeded", "ETA", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	cells := table.Rows[0].Cells
	want := []any{"shown", float64(9), "0.8125", "0.5", "False", "True"}
	if diff := cmp.Diff(want, cells[:6]); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

// readTable lists the jobs of namespace ns as `kubectl get gnnjob` reads
// them: the Table form the API server renders from the printer columns.
func readTable(ns string) (metav1.Table, error) {
	var table metav1.Table
	raw, err := kubernetes.NewForConfigOrDie(restConfig).RESTClient().Get().AbsPath("/apis/dorylus.dev/v1alpha1/namespaces/"+ns+"/gnntrainingjobs").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		return table, err
	}
	err = json.Unmarshal(raw, &table)
	return table, err
}
