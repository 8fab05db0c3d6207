package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// newRecorder returns the recorder of one server, with room for every task and wait of a run
// of epochs over intervals (capped: the buffer grows past that).
func newRecorder(server, epochs, intervals, layers int) *trace.Recorder {
	perEpoch := intervals * (2*(6*layers+2) + 4*layers + 1) // tasks, waits between them, waits inside AV and ∇AV
	return trace.New(server, min(epochs*perEpoch, 1<<20))
}

// writeTraceFile writes f to path as Chrome trace-event JSON.
func writeTraceFile(path string, f trace.File) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	if err := trace.Write(out, f); err != nil {
		out.Close()
		return fmt.Errorf("--trace %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("--trace %s: %w", path, err)
	}
	return nil
}

// finishTrace writes f to path, prints its per-epoch summary to stderr, and returns the
// summary for the report.
func finishTrace(path string, f trace.File, stderr io.Writer) ([]trace.EpochSummary, error) {
	if len(f.Spans) == 0 {
		return nil, errors.New("--trace: no task was recorded")
	}
	if err := writeTraceFile(path, f); err != nil {
		return nil, err
	}
	sums := trace.Summarize(f)
	trace.WriteSummary(stderr, sums)
	fmt.Fprintf(stderr, "trace: %d spans written to %s (open it in Perfetto or chrome://tracing)\n", len(f.Spans), path)
	return sums, nil
}
