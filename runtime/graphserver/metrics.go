package graphserver

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
)

// metrics are a graph server's Prometheus series, labelled with its partition; graph server
// 0 adds the run's progress. A nil *metrics records nothing.
type metrics struct {
	task      *prometheus.HistogramVec // by kind
	staleness prometheus.Histogram     // of the rows each GA reads
	sent      *prometheus.CounterVec   // by peer partition

	// graph server 0
	epoch, epochSeconds, loss, valAcc, trainAcc, testAcc, costUSD, epochCostUSD prometheus.Gauge
}

// newMetrics registers a graph server's series with reg, and its tensor backend's if it is a
// prometheus.Collector; nil reg: none.
func newMetrics(reg prometheus.Registerer, partition int, coordinator bool, backend any) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"partition": strconv.Itoa(partition)}, reg)
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "dorylus", Subsystem: "run", Name: name, Help: help})
	}
	m := &metrics{
		task: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "dorylus", Subsystem: "graph_server", Name: "task_seconds",
			Help:    "Time of the pipeline tasks of the local intervals, by kind (GA, AV, SC, ∇SC, ∇AV, ∇GA, WU).",
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10)}, []string{"kind"}),
		staleness: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "dorylus", Subsystem: "graph_server", Name: "gather_staleness_epochs",
			Help: "How many epochs older than its own the oldest rows a Gather read were.", Buckets: prometheus.LinearBuckets(0, 1, 8)}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dorylus", Subsystem: "graph_server", Name: "peer_sent_bytes_total",
			Help: "Tensor payload bytes sent to each other graph server."}, []string{"peer"}),
	}
	cs := []prometheus.Collector{m.task, m.staleness, m.sent}
	if c, ok := backend.(prometheus.Collector); ok {
		cs = append(cs, c)
	}
	if coordinator {
		m.epoch = gauge("epoch", "The last completed epoch (1-based).")
		m.epochSeconds = gauge("epoch_seconds", "Duration of the last completed epoch.")
		m.loss = gauge("loss", "Training loss of the last completed epoch.")
		m.valAcc = gauge("val_accuracy", "Validation accuracy of the last evaluation.")
		m.trainAcc = gauge("train_accuracy", "Training accuracy of the final evaluation.")
		m.testAcc = gauge("test_accuracy", "Test accuracy of the final evaluation.")
		m.costUSD = gauge("cost_usd", "Estimated cost of the run so far in US dollars (servers and tensor calls).")
		m.epochCostUSD = gauge("epoch_cost_usd", "Estimated cost of the last completed epoch in US dollars.")
		cs = append(cs, m.epoch, m.epochSeconds, m.loss, m.valAcc, m.trainAcc, m.testAcc, m.costUSD, m.epochCostUSD)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// finished records a task's time and, for a Gather, the staleness of the rows it read: the
// epochs it read them at, which the slot guard may have made fresher than Start handed out.
func (m *metrics) finished(st pipeline.Started, d time.Duration) {
	if m == nil {
		return
	}
	m.task.WithLabelValues(st.Task.Kind.String()).Observe(d.Seconds())
	if st.Task.Kind != pipeline.KindGA || len(st.Reads) == 0 {
		return
	}
	oldest := st.Task.Epoch
	for _, r := range st.Reads {
		oldest = min(oldest, r.Epoch)
	}
	m.staleness.Observe(float64(st.Task.Epoch - oldest))
}

// sentTo counts bytes sent to peer q.
func (m *metrics) sentTo(q int, bytes int) {
	if m != nil {
		m.sent.WithLabelValues(strconv.Itoa(q)).Add(float64(bytes))
	}
}

// progress sets the run's series from graph server 0's event.
func (m *metrics) progress(ev Event) {
	if m == nil || m.epoch == nil {
		return
	}
	m.epoch.Set(float64(ev.Epoch))
	if ev.ValAcc != nil {
		m.valAcc.Set(*ev.ValAcc)
	}
	if ev.CostUSD > 0 {
		m.costUSD.Set(ev.CostUSD)
	}
	if ev.Event == EventResult {
		m.trainAcc.Set(ev.TrainAcc)
		m.testAcc.Set(ev.TestAcc)
		return
	}
	m.epochSeconds.Set(ev.Seconds)
	m.loss.Set(ev.Loss)
	m.epochCostUSD.Set(ev.EpochCostUSD)
}
