package objstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff is a retry policy: up to Attempts tries, sleeping Initial, 2·Initial, … (capped at
// Max, with ±25 % jitter) between them. The zero value means 5 attempts from 200 ms to 5 s.
type Backoff struct {
	Attempts int           // tries in all; 0: 5
	Initial  time.Duration // first sleep; 0: 200 ms
	Max      time.Duration // longest sleep; 0: 5 s
}

func (b Backoff) attempts() int {
	if b.Attempts <= 0 {
		return 5
	}
	return b.Attempts
}

// Delay returns the sleep before retry number retry (1 for the first retry).
func (b Backoff) Delay(retry int) time.Duration {
	d, hi := b.Initial, b.Max
	if d <= 0 {
		d = 200 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	for i := 1; i < retry && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d - d/4 + rand.N(d/2+1)
}

// Sleep waits Delay(retry), or returns ctx's error when it ends first.
func (b Backoff) Sleep(ctx context.Context, retry int) error {
	t := time.NewTimer(b.Delay(retry))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retries reports whether a failure on try number try (1-based) may be retried.
func (b Backoff) Retries(try int) bool { return try < b.attempts() }

// Do calls op until it succeeds, fails with an error that is not Transient, or has been tried
// Attempts times; the last error is returned, noting the number of tries when more than one.
func (b Backoff) Do(ctx context.Context, op func(context.Context) error) error {
	for try := 1; ; try++ {
		err := op(ctx)
		if err == nil || !Transient(err) || ctx.Err() != nil {
			return err
		}
		if !b.Retries(try) {
			return fmt.Errorf("%w (gave up after %d tries)", err, try)
		}
		if serr := b.Sleep(ctx, try); serr != nil {
			return fmt.Errorf("%w (retry interrupted: %v)", err, serr)
		}
	}
}
