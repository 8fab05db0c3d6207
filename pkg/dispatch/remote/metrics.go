package remote

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Prometheus series of a remote backend, read from Usage when scraped.
var (
	descInFlight   = desc("calls_in_flight", "Tensor calls in flight now.")
	descLimit      = desc("concurrency_limit", "Tensor calls in flight the autotuner allows now.")
	descTries      = desc("calls_total", "Tensor calls sent: first tries, retries and relaunches.")
	descRetries    = desc("retries_total", "Tensor calls sent again after a failed one.")
	descRelaunches = desc("relaunches_total", "Tensor calls launched beside a straggler.")
	descFailures   = desc("failures_total", "Tensor calls that failed.")
	descSplits     = desc("splits_total", "Tensor tasks cut by rows to fit the payload limits.")
	descBilled     = desc("billed_seconds_total", "Summed duration of the tensor calls, each rounded up to a millisecond.")
)

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName("dorylus", "tensor_backend", name), help, nil, nil)
}

// Describe sends the backend's series descriptions.
func (b *Backend) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInFlight, descLimit, descTries, descRetries, descRelaunches, descFailures, descSplits, descBilled} {
		ch <- d
	}
}

// Collect sends the backend's series.
func (b *Backend) Collect(ch chan<- prometheus.Metric) {
	u := b.Usage()
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(u.InFlight))
	ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(u.Limit))
	for _, c := range []struct {
		d *prometheus.Desc
		v int64
	}{{descTries, u.Tries}, {descRetries, u.Retries}, {descRelaunches, u.Relaunches}, {descFailures, u.Failures}, {descSplits, u.Splits}} {
		ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v))
	}
	ch <- prometheus.MustNewConstMetric(descBilled, prometheus.CounterValue, u.Billed.Seconds())
}
