package controllers

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestJobCollector checks the job gauges against a job with progress.
func TestJobCollector(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "gauged"))
	waitCondition(t, ns, "gauged", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	report(t, ns, "gauged", jobstatus.Progress{Epoch: 7, TrainAccuracy: 0.9, ValAccuracy: 0.75, TestAccuracy: 0.7, CostUSD: 0.125})
	eventually(t, "progress", func() error {
		if p := getJob(t, ns, "gauged").Status.Progress; p == nil || p.Epoch != 7 {
			return fmt.Errorf("progress %+v", p)
		}
		return nil
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewJobCollector(k8sClient))
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if f.GetName() == "dorylus_gnntrainingjobs" {
				if labels["condition"] == "Created" {
					got["created/"+labels["status"]] = m.GetGauge().GetValue()
				}
				continue
			}
			if labels["namespace"] == ns {
				got[f.GetName()+"/"+labels["split"]] = m.GetGauge().GetValue()
			}
		}
	}
	want := map[string]float64{
		"dorylus_gnntrainingjob_epoch/": 7, "dorylus_gnntrainingjob_cost_usd/": 0.125,
		"dorylus_gnntrainingjob_accuracy/train": 0.9, "dorylus_gnntrainingjob_accuracy/val": 0.75,
		"dorylus_gnntrainingjob_accuracy/test": 0.7, "dorylus_gnntrainingjob_restarts/": 0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if got["created/True"] < 1 {
		t.Errorf("jobs with Created=True: %v, want at least 1", got["created/True"])
	}
}
