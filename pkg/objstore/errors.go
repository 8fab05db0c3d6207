package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/aws/smithy-go"
)

var (
	// ErrNotFound reports a missing object or bucket (HTTP 404).
	ErrNotFound = errors.New("not found")
	// ErrAccessDenied reports refused credentials or a denied operation (HTTP 401 or 403).
	ErrAccessDenied = errors.New("access denied")
)

// Error is a failed store or HTTP call, classified: Kind is ErrNotFound, ErrAccessDenied or nil.
type Error struct {
	Kind   error  // ErrNotFound, ErrAccessDenied, or nil for anything else
	Status int    // HTTP status code, 0 when no answer came
	Code   string // the store's error code (NoSuchKey, AccessDenied, ...), if any
	Err    error  // the underlying error
}

// Error formats the kind, status and code, and the underlying error only when unclassified.
func (e *Error) Error() string {
	detail := ""
	switch {
	case e.Status != 0 && e.Code != "":
		detail = fmt.Sprintf(" (HTTP %d %s)", e.Status, e.Code)
	case e.Status != 0:
		detail = fmt.Sprintf(" (HTTP %d)", e.Status)
	case e.Code != "":
		detail = " (" + e.Code + ")"
	}
	if e.Kind != nil {
		return e.Kind.Error() + detail
	}
	return e.Err.Error() + detail
}

// Unwrap returns the kind and the underlying error, so errors.Is matches both.
func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// StatusError is an HTTP answer with an unexpected status, for callers that speak plain HTTP.
type StatusError struct {
	StatusCode int    // the HTTP status
	Status     string // the status line
}

// Error returns the status line.
func (e *StatusError) Error() string { return "HTTP " + e.Status }

// HTTPStatusCode returns the status code.
func (e *StatusError) HTTPStatusCode() int { return e.StatusCode }

// Classify wraps err in an *Error naming its HTTP status and store error code, with Kind set
// for missing objects and denied access. nil stays nil; an *Error is returned unchanged.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	status, code := statusOf(err)
	e = &Error{Status: status, Code: code, Err: err}
	switch {
	case status == 404 || code == "NoSuchKey" || code == "NoSuchBucket" || code == "NotFound":
		e.Kind = ErrNotFound
	case status == 401 || status == 403 || code == "AccessDenied" || code == "InvalidAccessKeyId" ||
		code == "SignatureDoesNotMatch" || code == "Forbidden":
		e.Kind = ErrAccessDenied
	}
	return e
}

// statusOf returns the HTTP status and store error code carried by err, if any.
func statusOf(err error) (int, string) {
	status := 0
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		status = hs.HTTPStatusCode()
	}
	code := ""
	var api smithy.APIError
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	return status, code
}

// Transient reports whether err may go away on a retry: a 5xx or 429 answer, throttling, a
// request timeout, or a broken, refused or reset connection. Cancellation of the caller's
// context and every other 4xx answer are permanent.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	status, code := statusOf(err)
	switch {
	case status >= 500 || status == 429 || status == 408:
		return true
	case code == "SlowDown" || code == "RequestTimeout" || code == "InternalError" || code == "ServiceUnavailable":
		return true
	case status != 0:
		return false
	}
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne)
}
