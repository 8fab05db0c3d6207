package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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

// serverTracePath is the --trace file of graph server q in a run of dorylus train.
func serverTracePath(dir string, q int) string {
	return filepath.Join(dir, fmt.Sprintf("trace-%d.json", q))
}

// mergeTraces merges the trace files of n graph servers in dir into one.
func mergeTraces(dir string, n int) (trace.File, error) {
	files := make([]trace.File, n)
	for q := range files {
		f, err := os.Open(serverTracePath(dir, q))
		if err != nil {
			return trace.File{}, fmt.Errorf("trace of graph server %d: %w", q, err)
		}
		files[q], err = trace.Read(f)
		f.Close()
		if err != nil {
			return trace.File{}, fmt.Errorf("trace of graph server %d: %w", q, err)
		}
	}
	return trace.Merge(files...), nil
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
