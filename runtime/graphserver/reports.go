package graphserver

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// reportWriter writes the reports graph server 0's loop asks for: the progress lines to
// Config.Events and the metrics, the progress to Config.Status (through a statusReporter, so
// that the loop never waits on the API server), and warnings to Config.Log.
type reportWriter struct {
	enc     *json.Encoder   // nil without Config.Events
	status  *statusReporter // nil without Config.Status
	log     io.Writer
	metrics *metrics
}

func newReports(cfg *Config, m *metrics) *reportWriter {
	r := &reportWriter{log: cfg.Log, metrics: m}
	if cfg.Events != nil {
		r.enc = json.NewEncoder(cfg.Events)
	}
	if cfg.Status != nil {
		r.status = newStatusReporter(cfg.Status, cfg.StatusInterval, cfg.Log)
	}
	return r
}

// write writes out's reports to those of Config.Events, Config.Status and Config.Log that are
// set; a progress line that cannot be written ends the run.
func (r *reportWriter) write(out *effects) error {
	for _, s := range out.writeLogs {
		if r.log != nil {
			fmt.Fprintln(r.log, s)
		}
	}
	for _, u := range out.writeStatus {
		if r.status != nil {
			r.status.update(u.progress, u.final)
		}
	}
	for _, ev := range out.writeLines {
		r.metrics.progress(ev)
		if r.enc == nil {
			continue
		}
		if err := r.enc.Encode(ev); err != nil {
			return fmt.Errorf("write progress: %w", err)
		}
	}
	return nil
}

// finish reports failure, if set, as the run's and waits at most flush (DefaultStatusFlush if
// 0) for the last status report. The loop has ended.
func (r *reportWriter) finish(failure *jobstatus.Progress, flush time.Duration) {
	if r.status == nil {
		return
	}
	if failure != nil {
		r.status.update(*failure, true)
	}
	if flush <= 0 {
		flush = DefaultStatusFlush
	}
	r.status.close(flush)
}
