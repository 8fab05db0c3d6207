package controllers

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// conditionTypes are the condition types counted by the jobs gauge.
var conditionTypes = []string{
	dorylusv1alpha1.ConditionCreated, dorylusv1alpha1.ConditionReady, dorylusv1alpha1.ConditionTraining,
	dorylusv1alpha1.ConditionSucceeded, dorylusv1alpha1.ConditionFailed, dorylusv1alpha1.ConditionSuspended,
}

// JobCollector exports gauges about GNNTrainingJobs, computed from the
// manager's cache at scrape time so that deleted jobs leave no stale series.
type JobCollector struct {
	reader   client.Reader
	jobs     *prometheus.Desc
	epoch    *prometheus.Desc
	accuracy *prometheus.Desc
	cost     *prometheus.Desc
	restarts *prometheus.Desc
}

// NewJobCollector returns a collector that lists jobs through reader.
func NewJobCollector(reader client.Reader) *JobCollector {
	job := []string{"namespace", "name"}
	return &JobCollector{
		reader: reader,
		jobs: prometheus.NewDesc("dorylus_gnntrainingjobs",
			"Number of GNNTrainingJobs whose condition of the given type has the given status.",
			[]string{"condition", "status"}, nil),
		epoch: prometheus.NewDesc("dorylus_gnntrainingjob_epoch",
			"Last epoch reported by the job's graph server 0.", job, nil),
		accuracy: prometheus.NewDesc("dorylus_gnntrainingjob_accuracy",
			"Accuracy reported by graph server 0, by split (train, val, test).", append(job, "split"), nil),
		cost: prometheus.NewDesc("dorylus_gnntrainingjob_cost_usd",
			"Estimated cost of the job so far in US dollars.", job, nil),
		restarts: prometheus.NewDesc("dorylus_gnntrainingjob_restarts",
			"Times the job restarted every server from its last checkpoint after a failure (status.restarts).", job, nil),
	}
}

// Describe sends the collector's descriptors.
func (c *JobCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs, c.epoch, c.accuracy, c.cost, c.restarts} {
		ch <- d
	}
}

// Collect lists the jobs and sends one sample per gauge and job.
func (c *JobCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list dorylusv1alpha1.GNNTrainingJobList
	if err := c.reader.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "list GNNTrainingJobs for metrics")
		return
	}
	counts := map[[2]string]float64{}
	for _, t := range conditionTypes {
		for _, s := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse} {
			counts[[2]string{t, string(s)}] = 0
		}
	}
	for i := range list.Items {
		job := &list.Items[i]
		for _, cond := range job.Status.Conditions {
			counts[[2]string{cond.Type, string(cond.Status)}]++
		}
		ns, name := job.Namespace, job.Name
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.GaugeValue, float64(job.Status.Restarts), ns, name)
		p := job.Status.Progress
		if p == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.epoch, prometheus.GaugeValue, float64(p.Epoch), ns, name)
		for split, v := range map[string]*dorylusv1alpha1.Decimal{"train": p.TrainAccuracy, "val": p.ValAccuracy, "test": p.TestAccuracy} {
			if f, ok := decimalValue(v); ok {
				ch <- prometheus.MustNewConstMetric(c.accuracy, prometheus.GaugeValue, f, ns, name, split)
			}
		}
		if f, ok := decimalValue(p.CostUSD); ok {
			ch <- prometheus.MustNewConstMetric(c.cost, prometheus.GaugeValue, f, ns, name)
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, n, k[0], k[1])
	}
}

func decimalValue(d *dorylusv1alpha1.Decimal) (float64, bool) {
	if d == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(*d), 64)
	return f, err == nil
}
