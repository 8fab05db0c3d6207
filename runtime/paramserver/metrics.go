package paramserver

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Prometheus series of a shard, read from its state when scraped.
var (
	shardLabels        = []string{"shard"}
	descVersion        = prometheus.NewDesc("dorylus_param_server_weight_version", "The shard's newest weight version (updates applied).", shardLabels, nil)
	descVersionsHeld   = prometheus.NewDesc("dorylus_param_server_versions_held", "Weight versions the shard keeps for pinned readers (weight stashing).", shardLabels, nil)
	descCheckpointSeen = prometheus.NewDesc("dorylus_param_server_checkpoint_version", "The weight version of the newest checkpoint saved or restored.", shardLabels, nil)
)

// Describe sends the shard's series descriptions; a Shard is a prometheus.Collector.
func (s *Shard) Describe(ch chan<- *prometheus.Desc) {
	ch <- descVersion
	ch <- descVersionsHeld
	ch <- descCheckpointSeen
}

// Collect sends the shard's series.
func (s *Shard) Collect(ch chan<- prometheus.Metric) {
	v := s.inspect()
	id := strconv.Itoa(s.id)
	ch <- prometheus.MustNewConstMetric(descVersion, prometheus.GaugeValue, float64(v.newest), id)
	ch <- prometheus.MustNewConstMetric(descVersionsHeld, prometheus.GaugeValue, float64(len(v.held)), id)
	ch <- prometheus.MustNewConstMetric(descCheckpointSeen, prometheus.GaugeValue, float64(v.saved), id)
}
