package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// finishTrace writes f to path, prints its per-epoch summary to stderr, and returns the
// summary for the report.
func finishTrace(path string, f trace.File, stderr io.Writer) ([]trace.EpochSummary, error) {
	if len(f.Spans) == 0 {
		return nil, errors.New("--trace: no task was recorded")
	}
	if err := trace.WriteFile(path, f); err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	sums := trace.Summarize(f)
	trace.WriteSummary(stderr, sums)
	fmt.Fprintf(stderr, "trace: %d spans written to %s (open it in Perfetto or chrome://tracing)\n", len(f.Spans), path)
	return sums, nil
}
