// Package objstore connects the data plane to S3-compatible object stores: the client
// configuration that dataset sources (pkg/source) and checkpoint stores (pkg/checkpoint) share —
// region, endpoint override with path-style addressing, credentials from a mounted folder or the
// SDK's default chain — the classification of store errors into the few cases callers act on
// (ErrNotFound, ErrAccessDenied, transient), and the retry-with-backoff policy both use.
//
// The SDK's own retries are turned off: Backoff.Do retries transient failures (5xx answers,
// throttling, broken connections) with capped exponential backoff and gives up at once on the
// rest, so one policy bounds how long any call can take.
package objstore
