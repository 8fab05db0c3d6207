// Package remote is the client half the serverless tensor backends share (packages lambda and
// knative supply only a Transport): a Backend encodes each task in the dispatch wire format,
// cuts it by rows when it exceeds the transport's payload limits, and sends it through the
// Transport to one of its endpoints, with a per-call timeout, retries with exponential backoff
// and jitter on transient failures (throttling, 5xx, timeouts, crashed functions, lost
// connections), relaunch of stragglers (a call slower than k × the running median of its kind
// of task, and at least a floor, is launched again elsewhere and the first answer wins, as the
// original Dorylus does with k = 5 and 500 ms), and a number of calls in flight that a tuner
// adapts to the queue of waiting tasks and the observed latency, capped by MaxConcurrency (a
// relaunch comes on top, at most one per try, so that it starts at once).
//
// A call that loses a race is not cancelled: it runs to its end or its timeout and its answer
// is dropped, because a function keeps running (and an emulator stays busy) whatever the
// client does. Its time is billed all the same, and Usage counts it. It gives back its
// concurrency slot when the race ends, so that stragglers cannot fill MaxConcurrency, but its
// endpoint stays busy until it ends (PerEndpoint still holds).
package remote

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Transport sends one encoded request to an endpoint and returns the encoded result. It wraps
// the errors a new try may not meet in ErrTransient (and ErrThrottled or ErrUnreachable where
// they apply); any other error fails the task at once.
type Transport interface {
	Call(ctx context.Context, endpoint string, body []byte) ([]byte, error)
}

// Error classes of a Transport.
var (
	// ErrTransient marks a failure worth another try.
	ErrTransient = errors.New("transient failure")
	// ErrThrottled marks a transient failure the service reported as throttling; the
	// backend lowers its concurrency.
	ErrThrottled = errors.New("throttled")
	// ErrUnreachable marks a transient failure to reach the endpoint at all; the backend
	// avoids the endpoint for a while.
	ErrUnreachable = errors.New("endpoint unreachable")
	// ErrClosed is returned by calls on a closed backend.
	ErrClosed = errors.New("tensor backend closed")
)

// The error types a function reports, in Lambda's errorType or the HTTP header ErrorTypeHeader.
const (
	// ErrorTypeBadRequest: the function cannot serve the request (wrong version, bad shape,
	// too large); another try cannot help.
	ErrorTypeBadRequest = "dorylus.BadRequest"
	// ErrorTypeFailed: the task failed inside the function; another try may succeed.
	ErrorTypeFailed = "dorylus.Failed"
	// ErrorTypeNeedCertificate: on the pull data path, the function holds no certificate of
	// the descriptor's CA; the message is its public key (NeedCertificate).
	ErrorTypeNeedCertificate = "dorylus.NeedCertificate"
	// ErrorTypeHeader is the HTTP response header that carries the error type.
	ErrorTypeHeader = "X-Dorylus-Error-Type"
)

// NeedCertificate is a function's answer to a descriptor whose CA it holds no certificate
// of: the public key it made (PKIX DER, base64 in the answer's message), which the Store's
// function issuer certifies before the call is sent again with the chain. The answer comes
// through the transport that authenticates the function (Lambda's Invoke, the function's
// verified HTTPS): only a certificate, never a key, travels back.
type NeedCertificate struct{ PublicKey []byte }

// Error returns the message.
func (e *NeedCertificate) Error() string {
	return "the function needs a certificate of the job's for its key"
}

// ParseNeedCertificate returns the NeedCertificate answer of a function whose message is msg.
func ParseNeedCertificate(msg string) (*NeedCertificate, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(msg))
	if err != nil || len(k) == 0 || len(k) > 1024 {
		return nil, fmt.Errorf("a %s answer without a public key (%d bytes of message)", ErrorTypeNeedCertificate, len(msg))
	}
	return &NeedCertificate{PublicKey: k}, nil
}

// Options configures a Backend. Zero values take the defaults given.
type Options struct {
	// Name names the backend in errors, e.g. "lambda dorylus-fn".
	Name string
	// Endpoints are where calls go (at least one): URLs, or what the Transport understands.
	Endpoints []string
	// PerEndpoint is how many calls one endpoint serves at once (0: any number). The Lambda
	// emulator serves one.
	PerEndpoint int
	// MaxConcurrency caps the first tries in flight whose answer is awaited (at least 1). A
	// straggler's relaunch comes on top, at most one per try, so that it starts at once.
	MaxConcurrency int
	// InitialConcurrency is where the tuner starts (default 1); it then adds one call per
	// completion while tasks wait.
	InitialConcurrency int
	// Fixed turns the tuner off: MaxConcurrency calls may always be in flight.
	Fixed bool
	// MaxRequestBytes and MaxResultBytes are the transport's payload limits (0: none); a
	// larger task is cut by rows.
	MaxRequestBytes, MaxResultBytes int
	// Pull, when set, selects the pull data path: a call carries a dispatch.Descriptor and the
	// function fetches the task's inputs from Pull (served by the graph server) and a weight
	// with a WeightSource from its parameter server. Nil: the tensors travel in the request.
	Pull *Store
	// CallTimeout bounds one try (default 60 s). Set it above the function's own timeout, so
	// that a slow function is reported by the service rather than abandoned mid-call.
	CallTimeout time.Duration
	// Attempts is how many times a task is tried before its error is returned (default 4).
	Attempts int
	// Backoff is the wait before the first retry (default 50 ms); it doubles up to MaxBackoff
	// (default 2 s), with jitter.
	Backoff, MaxBackoff time.Duration
	// StragglerFactor is k of the straggler rule (default 5; negative: no relaunch).
	StragglerFactor float64
	// StragglerFloor is the least time before a relaunch (default 500 ms).
	StragglerFloor time.Duration
	// Placement, when set, runs the kinds of task it places locally on Local (an in-process
	// backend) instead of calling a function.
	Placement *dispatch.Placement
	Local     dispatch.Backend
}

func (o *Options) defaults() error {
	switch {
	case len(o.Endpoints) == 0:
		return fmt.Errorf("%s: no endpoints", o.Name)
	case o.MaxConcurrency < 1:
		return fmt.Errorf("%s: max concurrency %d: want at least 1", o.Name, o.MaxConcurrency)
	case o.PerEndpoint < 0 || o.InitialConcurrency < 0 || o.MaxRequestBytes < 0 || o.MaxResultBytes < 0 || o.CallTimeout < 0 ||
		o.Attempts < 0 || o.Backoff < 0 || o.MaxBackoff < 0 || o.StragglerFloor < 0:
		return fmt.Errorf("%s: negative option in %+v", o.Name, *o)
	case o.Placement != nil && o.Local == nil:
		return fmt.Errorf("%s: a placement without a local backend", o.Name)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.CallTimeout, 60*time.Second)
	def(&o.Backoff, 50*time.Millisecond)
	def(&o.MaxBackoff, 2*time.Second)
	def(&o.StragglerFloor, 500*time.Millisecond)
	if o.Attempts == 0 {
		o.Attempts = 4
	}
	if o.StragglerFactor == 0 {
		o.StragglerFactor = 5
	}
	if o.Fixed {
		o.InitialConcurrency = o.MaxConcurrency
	}
	return nil
}

// Usage counts a backend's calls.
type Usage struct {
	Tasks      int64         // tasks run, Local included
	Local      int64         // tasks run in the graph server (Options.Placement)
	Tries      int64         // calls sent: first tries, retries and relaunches
	Retries    int64         // tries after a failed one
	Relaunches int64         // tries launched beside a straggler
	Failures   int64         // tries that failed
	Splits     int64         // tasks cut by rows to fit the payload limits
	Billed     time.Duration // summed time of every try, each rounded up to a millisecond
	Limit      int           // calls in flight the tuner allows now
	InFlight   int           // calls in flight now
}

// Backend runs tensor tasks through a Transport; it implements dispatch.Backend,
// dispatch.Closer, dispatch.StatsReporter, dispatch.Biller, dispatch.Placer and
// prometheus.Collector.
type Backend struct {
	opts Options
	tr   Transport
	life context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	tune     *tuner
	eps      []endpoint
	inflight int
	queued   int           // tasks waiting for their first try's slot
	changed  chan struct{} // closed when a slot may have freed
	usage    Usage
	busy     time.Duration
}

// endpoint is one endpoint's state.
type endpoint struct {
	addr      string
	busy      int
	fails     int // consecutive unreachable failures
	downUntil time.Time
}

// New returns a backend that sends its calls through tr.
func New(tr Transport, o Options) (*Backend, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	b := &Backend{opts: o, tr: tr, tune: newTuner(o.InitialConcurrency, o.MaxConcurrency, o.Fixed), changed: make(chan struct{})}
	for _, e := range o.Endpoints {
		b.eps = append(b.eps, endpoint{addr: e})
	}
	b.life, b.stop = context.WithCancel(context.Background())
	return b, nil
}

// Concurrency returns MaxConcurrency.
func (b *Backend) Concurrency() int { return b.opts.MaxConcurrency }

// Stats returns the tasks run and their summed time.
func (b *Backend) Stats() dispatch.Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return dispatch.Stats{Calls: b.usage.Tasks, Busy: b.busy}
}

// Usage returns the backend's call counts.
func (b *Backend) Usage() Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.usage
	u.Limit, u.InFlight = b.tune.limit, b.inflight
	return u
}

// Billing returns the tries sent so far and their billed duration, and the tasks run in the
// graph server instead.
func (b *Backend) Billing() cost.Calls {
	b.mu.Lock()
	defer b.mu.Unlock()
	return cost.Calls{Requests: b.usage.Tries, Billed: b.usage.Billed, Local: b.usage.Local}
}

// Placement returns the placement of the backend's tasks (nil: all remote).
func (b *Backend) Placement() *dispatch.Placement { return b.opts.Placement }

// Close stops the calls still running and closes the transport and the local backend if
// they are dispatch.Closers.
func (b *Backend) Close() error {
	b.stop()
	var errs []error
	for _, x := range []any{b.tr, b.opts.Local} {
		if c, ok := x.(dispatch.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Run sends the task and waits for its result.
func (b *Backend) Run(ctx context.Context, req dispatch.TaskRequest) (dispatch.TaskResult, error) {
	start := time.Now()
	defer func() {
		b.mu.Lock()
		b.usage.Tasks++
		b.busy += time.Since(start)
		b.mu.Unlock()
	}()
	if b.opts.Placement.Local(&req) {
		b.mu.Lock()
		b.usage.Local++
		b.mu.Unlock()
		return b.opts.Local.Run(ctx, req)
	}
	if err := req.Validate(); err != nil {
		return dispatch.TaskResult{}, err
	}
	encode := inline
	if st := b.opts.Pull; st != nil {
		id := st.add(&req)
		defer st.remove(id)
		encode = st.descriptor(id)
	}
	parts, err := split(&req, encode, b.opts.MaxRequestBytes, b.opts.MaxResultBytes)
	if err != nil {
		return dispatch.TaskResult{}, fmt.Errorf("%s: %w", b.opts.Name, err)
	}
	k := kind{req.Op, req.Layer}
	if len(parts) == 1 {
		body, err := b.call(ctx, k, &req, parts[0].body)
		if err != nil {
			return dispatch.TaskResult{}, err
		}
		res, err := dispatch.DecodeResult(body, req.Op, req.Destinations())
		if err != nil {
			return res, fmt.Errorf("%s: %v layer %d: %w", b.opts.Name, req.Op, req.Layer, err)
		}
		return res, nil
	}
	b.mu.Lock()
	b.usage.Splits++
	b.mu.Unlock()
	return b.runParts(ctx, k, &req, parts)
}

// runParts runs the row ranges of a task at once and assembles their results: Out row by
// row, dW and the loss summed in row order.
func (b *Backend) runParts(ctx context.Context, k kind, req *dispatch.TaskRequest, parts []part) (dispatch.TaskResult, error) {
	out := req.Out
	if r, c, ok := outShape(req); ok && out == nil {
		out = tensor.NewDense(r, c)
	}
	results := make([]dispatch.TaskResult, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() {
			p := &parts[i]
			body, err := b.call(ctx, k, &p.req, p.body)
			if err != nil {
				errs[i] = err
				return
			}
			var into dispatch.TaskResult
			if out != nil {
				into.Out = out.RowSlice(p.lo, p.hi)
			}
			if results[i], err = dispatch.DecodeResult(body, req.Op, into); err != nil {
				errs[i] = fmt.Errorf("%s: %v layer %d rows %d+%d: %w", b.opts.Name, req.Op, req.Layer, p.req.RowOffset, p.hi-p.lo, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return dispatch.TaskResult{}, err
	}
	res := dispatch.TaskResult{Out: out}
	if req.Op == dispatch.OpBackward {
		res.DW = req.DW
		if res.DW == nil {
			res.DW = tensor.NewDense(req.W.Rows, req.W.Cols)
		}
		res.DW.Zero()
	}
	for _, r := range results {
		res.Loss += r.Loss
		if res.DW != nil && r.DW != nil {
			for j, v := range r.DW.Data {
				res.DW.Data[j] += v
			}
		}
	}
	return res, nil
}

// call sends body until it gets an answer, retrying transient failures with backoff.
func (b *Backend) call(ctx context.Context, k kind, req *dispatch.TaskRequest, body []byte) ([]byte, error) {
	wait := b.opts.Backoff
	for attempt := 1; ; attempt++ {
		res, err := b.race(ctx, k, body)
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, ErrTransient) || attempt >= b.opts.Attempts || ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %v layer %d rows %d+%d, try %d of %d: %w", b.opts.Name, req.Op, req.Layer, req.RowOffset, req.NumRows(), attempt, b.opts.Attempts, err)
		}
		b.mu.Lock()
		b.usage.Retries++
		b.mu.Unlock()
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		wait = min(2*wait, b.opts.MaxBackoff)
	}
}

// tryResult is the outcome of one try.
type tryResult struct {
	body []byte
	err  error
}

// slot is the concurrency slot of one try; a try still running when its race ends gives its
// slot back then (abandon), not again when it ends.
type slot struct{ released bool }

// release gives the slot back once; b.mu must be held.
func (b *Backend) release(s *slot) {
	if !s.released {
		s.released = true
		b.inflight--
		b.signal()
	}
}

// signal wakes the callers waiting for a slot; b.mu must be held.
func (b *Backend) signal() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// race makes one try and, if it straggles, a second on another endpoint; the first answer
// wins. It fails when every try it launched has failed.
func (b *Backend) race(ctx context.Context, k kind, body []byte) ([]byte, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan tryResult, 2)
	slots := []*slot{{released: true}, {released: true}}
	first, err := b.acquire(rctx, -1, true, slots[0])
	if err != nil {
		return nil, err
	}
	defer func() {
		b.mu.Lock()
		for _, s := range slots {
			b.release(s)
		}
		b.mu.Unlock()
	}()
	go b.try(k, first, slots[0], body, results)
	b.mu.Lock()
	after, ok := b.tune.threshold(k, b.opts.StragglerFactor, b.opts.StragglerFloor)
	b.mu.Unlock()
	var straggling <-chan time.Time
	if ok {
		t := time.NewTimer(after)
		defer t.Stop()
		straggling = t.C
	}
	running := 1
	for {
		select {
		case r := <-results:
			running--
			if r.err == nil {
				return r.body, nil
			}
			if running == 0 || !errors.Is(r.err, ErrTransient) {
				return nil, r.err
			}
		case <-straggling:
			straggling = nil
			running++
			go func() {
				i, err := b.acquire(rctx, first, false, slots[1])
				if err != nil {
					results <- tryResult{err: err}
					return
				}
				b.mu.Lock()
				b.usage.Relaunches++
				b.mu.Unlock()
				b.try(k, i, slots[1], body, results)
			}()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// try makes one call on endpoint i, which acquire gave it with slot s, and releases both.
func (b *Backend) try(k kind, i int, s *slot, body []byte, results chan<- tryResult) {
	ctx, cancel := context.WithTimeout(b.life, b.opts.CallTimeout)
	start := time.Now()
	res, err := b.tr.Call(ctx, b.eps[i].addr, body)
	calls := int64(1)
	if nc := (*NeedCertificate)(nil); errors.As(err, &nc) && b.opts.Pull != nil {
		// the function made a key and needs it certified: once, then again on this
		// endpoint; a function that still has none (another instance) is tried again later
		if body, err = b.opts.Pull.certify(body, nc); err == nil {
			res, err = b.tr.Call(ctx, b.eps[i].addr, body)
			calls++
		}
		if errors.As(err, &nc) {
			err = fmt.Errorf("%w: %s: %w", ErrTransient, b.eps[i].addr, err)
		}
	}
	d := time.Since(start)
	switch {
	case err != nil && b.life.Err() != nil:
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("%w: %s: no answer in %v: %w", ErrTransient, b.eps[i].addr, b.opts.CallTimeout, err)
	}
	cancel()
	b.mu.Lock()
	b.usage.Tries += calls
	b.usage.Billed += d.Truncate(time.Millisecond)
	if d%time.Millisecond != 0 {
		b.usage.Billed += time.Millisecond
	}
	b.release(s)
	e := &b.eps[i]
	e.busy--
	switch {
	case err == nil:
		e.fails, e.downUntil = 0, time.Time{}
		b.tune.done(k, d, b.queued)
	case errors.Is(err, ErrUnreachable):
		b.usage.Failures++
		e.fails++
		e.downUntil = time.Now().Add(min(time.Second<<min(e.fails-1, 5), 30*time.Second))
	default:
		b.usage.Failures++
		if errors.Is(err, ErrThrottled) {
			b.tune.throttled()
		}
	}
	b.signal()
	b.mu.Unlock()
	results <- tryResult{body: res, err: err}
}

// acquire waits for a free slot, takes it as s, and returns the endpoint to call: the least
// busy one that is not down, preferring any other than avoid. first counts the caller as a
// waiting task; a relaunch (not first) needs only a free endpoint, not a slot under the limit.
func (b *Backend) acquire(ctx context.Context, avoid int, first bool, s *slot) (int, error) {
	b.mu.Lock()
	if first {
		b.queued++
		defer func() { b.mu.Lock(); b.queued--; b.mu.Unlock() }()
	}
	for {
		if b.inflight < b.tune.limit || !first {
			if i := b.pick(avoid); i >= 0 {
				b.inflight++
				s.released = false
				b.eps[i].busy++
				b.mu.Unlock()
				return i, nil
			}
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-b.life.Done():
			return -1, ErrClosed
		}
		b.mu.Lock()
	}
}

// pick returns a free endpoint (-1: none), ordered by: not down, not avoid, least busy.
func (b *Backend) pick(avoid int) int {
	now := time.Now()
	best, bestScore := -1, 0
	for i, e := range b.eps {
		if b.opts.PerEndpoint > 0 && e.busy >= b.opts.PerEndpoint {
			continue
		}
		score := e.busy
		if i == avoid {
			score += 1 << 20
		}
		if now.Before(e.downUntil) {
			score += 1 << 30
		}
		if best < 0 || score < bestScore {
			best, bestScore = i, score
		}
	}
	return best
}
