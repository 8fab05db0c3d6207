// Package trace records a timeline of a training run — every task of every interval and
// every wait, on every server — and writes it as Chrome trace-event JSON (the "traceEvents"
// format with complete "X" events: pid the server, tid the lane) that Perfetto and
// chrome://tracing open. It reads such files back, merges the files of several servers into
// one, and sums each epoch of each server into busy and waiting time (Summarize).
//
// A nil *Recorder records nothing and costs a nil check: callers keep one pointer and call it
// unconditionally. A Recorder appends fixed-size spans to a buffer sized up front under one
// short lock.
package trace
