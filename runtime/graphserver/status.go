package graphserver

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// ProgressReporter receives graph server 0's progress; *jobstatus.Reporter is one, writing it
// into the GNNTrainingJob's status.progress.
type ProgressReporter interface {
	// Report writes p, the whole progress after an epoch.
	Report(ctx context.Context, p jobstatus.Progress) error
}

var _ ProgressReporter = (*jobstatus.Reporter)(nil)

// Defaults of the status reports.
const (
	// DefaultStatusInterval is the least time between two status reports but the final one.
	DefaultStatusInterval = time.Second
	// DefaultStatusFlush bounds the wait for the last status report when the server stops.
	DefaultStatusFlush = 10 * time.Second
	// statusReportTimeout bounds one status report.
	statusReportTimeout = 10 * time.Second
)

// statusReporter sends the coordinator's progress to a ProgressReporter from its own
// goroutine, so that the driver never waits on the API server: the newest progress wins, a
// report goes out at most once per interval except the final one, which goes at once, and a
// failed report is logged and otherwise ignored.
type statusReporter struct {
	r        ProgressReporter
	interval time.Duration
	timeout  time.Duration // of one report
	log      io.Writer
	base     context.Context
	abort    context.CancelFunc // cancels a report still in flight when the flush times out

	mu      sync.Mutex
	pending *jobstatus.Progress
	final   bool // pending is the final report
	closing bool
	wake    chan struct{}
	done    chan struct{}
}

func newStatusReporter(r ProgressReporter, interval time.Duration, log io.Writer) *statusReporter {
	if interval <= 0 {
		interval = DefaultStatusInterval
	}
	if log == nil {
		log = io.Discard
	}
	s := &statusReporter{r: r, interval: interval, timeout: statusReportTimeout, log: log,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.base, s.abort = context.WithCancel(context.Background())
	go s.loop()
	return s
}

// update queues p, replacing a queued report not yet sent; a final report is sent without
// waiting for the interval.
func (s *statusReporter) update(p jobstatus.Progress, final bool) {
	s.mu.Lock()
	if !s.closing {
		s.pending, s.final = &p, final || s.final
	}
	s.mu.Unlock()
	s.signal()
}

func (s *statusReporter) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close sends the queued report, if any, and waits for it at most timeout.
func (s *statusReporter) close(timeout time.Duration) {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.signal()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		fmt.Fprintf(s.log, "graph server 0: the last status report did not finish within %v; giving up\n", timeout)
		s.abort()
		<-s.done
	}
	s.abort()
}

func (s *statusReporter) loop() {
	defer close(s.done)
	var last time.Time // start of the last report
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		s.mu.Lock()
		p, final, closing := s.pending, s.final, s.closing
		now := time.Now()
		due := last.Add(s.interval)
		if p != nil && (final || closing || !now.Before(due)) {
			s.pending, s.final = nil, false
			s.mu.Unlock()
			last = now
			s.send(*p)
			continue
		}
		s.mu.Unlock()
		if closing {
			return
		}
		var tick <-chan time.Time
		if p != nil {
			timer.Reset(due.Sub(now))
			tick = timer.C
		}
		select {
		case <-s.wake:
		case <-tick:
		}
		timer.Stop()
	}
}

func (s *statusReporter) send(p jobstatus.Progress) {
	ctx, cancel := context.WithTimeout(s.base, s.timeout)
	defer cancel()
	if err := s.r.Report(ctx, p); err != nil {
		fmt.Fprintf(s.log, "graph server 0: status report of epoch %d failed (training goes on): %v\n", p.Epoch, err)
	}
}
