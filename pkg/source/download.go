package source

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// opener starts a transfer of an object from byte off, pinned to etag when it is not empty. It
// returns the body (positioned at off), the object's total size (-1 when unknown) and its ETag.
type opener func(ctx context.Context, off int64, pin string) (body io.ReadCloser, size int64, etag string, err error)

// resumer reads one object as a single stream across broken, failed and stalled transfers:
// each attempt resumes at the first byte not yet read, pinned to the ETag of the first.
type resumer struct {
	ctx     context.Context
	desc    string
	open    opener
	backoff objstore.Backoff
	stall   time.Duration

	off, size int64
	etag      string
	body      io.ReadCloser
	attempt   context.Context
	cancel    context.CancelCauseFunc
	timer     *time.Timer
	fails     int   // consecutive failures without progress
	err       error // the error the stream ended with, if any
}

func newResumer(ctx context.Context, desc string, open opener, opts *Options) *resumer {
	return &resumer{ctx: ctx, desc: desc, open: open, backoff: opts.Backoff, stall: opts.StallTimeout, size: -1}
}

// start opens a transfer at r.off, retrying transient failures.
func (r *resumer) start() error {
	for {
		attempt, cancel := context.WithCancelCause(r.ctx)
		r.attempt, r.cancel = attempt, cancel
		r.timer = time.AfterFunc(r.stall, func() { cancel(ErrStalled) })
		body, size, etag, err := r.open(r.attempt, r.off, r.etag)
		r.timer.Stop() // the stall clock runs only while waiting on the store
		if err == nil {
			r.body = body
			if r.etag == "" {
				r.etag = etag
			}
			if size >= 0 {
				r.size = size
			}
			return nil
		}
		if err = r.retry(err); err != nil {
			return err
		}
	}
}

// retry ends the current attempt after err and sleeps before the next, or returns the error
// that ends the stream.
func (r *resumer) retry(err error) error {
	stalled := context.Cause(r.attempt) == ErrStalled && r.ctx.Err() == nil
	r.endAttempt()
	if stalled {
		err = fmt.Errorf("%w: no data for %v at byte %d", ErrStalled, r.stall, r.off)
	}
	r.fails++
	switch {
	case r.ctx.Err() != nil:
		err = fmt.Errorf("%w (at byte %d)", r.ctx.Err(), r.off)
	case !stalled && !objstore.Transient(err):
	case !r.backoff.Retries(r.fails):
		err = fmt.Errorf("%w (gave up after %d tries without progress, at byte %d)", err, r.fails, r.off)
	default:
		if serr := r.backoff.Sleep(r.ctx, r.fails); serr == nil {
			return nil
		}
		err = fmt.Errorf("%w (at byte %d)", r.ctx.Err(), r.off)
	}
	r.err = err
	return err
}

func (r *resumer) endAttempt() {
	if r.body != nil {
		r.body.Close()
		r.body = nil
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.cancel != nil {
		r.cancel(context.Canceled)
	}
}

// Read implements io.Reader.
func (r *resumer) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for {
		if r.body == nil {
			if r.size >= 0 && r.off >= r.size {
				return 0, io.EOF
			}
			if err := r.start(); err != nil {
				return 0, err
			}
		}
		r.timer.Reset(r.stall)
		n, err := r.body.Read(p)
		r.timer.Stop()
		if n > 0 {
			r.off += int64(n)
			r.fails = 0
			return n, nil
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF) && (r.size < 0 || r.off >= r.size):
			r.endAttempt()
			return 0, io.EOF
		case errors.Is(err, io.EOF):
			err = fmt.Errorf("connection closed at byte %d of %d: %w", r.off, r.size, io.ErrUnexpectedEOF)
		}
		if err := r.retry(err); err != nil {
			return 0, err
		}
	}
}

// Close ends the transfer.
func (r *resumer) Close() { r.endAttempt() }

// etagFile is the sidecar of a downloaded file holding the ETag it was downloaded at.
func etagFile(dst string) string {
	return filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".etag")
}

// download fetches one object to dst: streamed into a temporary file next to it, teed
// through the prepared-format verifier when the object is a prepared file and through SHA-256
// when wantSHA is set, and renamed to dst only when complete and verified. A dst whose sidecar
// holds the object's current ETag is kept without reading the object.
func (f *fetcher) download(ctx context.Context, desc string, open opener, dst, wantSHA string) (err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("source: %s: %w", desc, err)
	}
	r := newResumer(ctx, desc, open, &f.opts)
	defer r.Close()
	if err := r.start(); err != nil {
		return fmt.Errorf("source: %s: %w", desc, objstore.Classify(err))
	}
	if old, rerr := os.ReadFile(etagFile(dst)); rerr == nil && r.etag != "" && string(old) == r.etag && isFile(dst) {
		return nil // already fetched at this version
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".part-*")
	if err != nil {
		return fmt.Errorf("source: %s: %w", desc, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	var w io.Writer = bw
	var sum hash.Hash
	if wantSHA != "" {
		sum = sha256.New()
		w = io.MultiWriter(bw, sum)
	}
	br := bufio.NewReaderSize(r, 1<<20)
	magic, _ := br.Peek(len("DORYGRPH"))
	if string(magic) == "DORYGRPH" {
		_, err = graph.VerifyPrepared(io.TeeReader(br, w), desc)
	} else {
		_, err = io.Copy(w, br)
	}
	switch {
	case r.err != nil: // the transfer failed: say so rather than what the verifier made of it
		return fmt.Errorf("source: %s: %w", desc, objstore.Classify(r.err))
	case errors.Is(err, graph.ErrCorrupt) || errors.Is(err, graph.ErrNotPrepared):
		return fmt.Errorf("source: %s: %w: %w", desc, ErrChecksum, err)
	case err != nil:
		return fmt.Errorf("source: %s: %w", desc, err)
	case r.size >= 0 && r.off != r.size:
		return fmt.Errorf("source: %s: got %d bytes of %d: %w", desc, r.off, r.size, io.ErrUnexpectedEOF)
	}
	if sum != nil {
		if got := hex.EncodeToString(sum.Sum(nil)); !strings.EqualFold(got, wantSHA) {
			return fmt.Errorf("source: %s: %w: SHA-256 %s, want %s", desc, ErrChecksum, got, wantSHA)
		}
	}
	if err = bw.Flush(); err == nil {
		if err = tmp.Sync(); err == nil {
			err = tmp.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("source: %s: write %s: %w", desc, tmp.Name(), err)
	}
	os.Remove(etagFile(dst))
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("source: %s: %w", desc, err)
	}
	if r.etag != "" {
		_ = os.WriteFile(etagFile(dst), []byte(r.etag), 0o644) // only an optimisation: a missing sidecar means a new download
	}
	return nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
