package trace

import (
	"fmt"
	"os"
)

// ForRun returns the recorder of one server, with room for every task and wait of a run of
// epochs over intervals of a network of layers (capped: the buffer grows past that).
func ForRun(server, epochs, intervals, layers int) *Recorder {
	perEpoch := intervals * (2*(6*layers+2) + 4*layers + 1) // tasks, waits between them, waits inside AV and ∇AV
	return New(server, min(epochs*perEpoch, 1<<20))
}

// WriteFile writes f to path as Chrome trace-event JSON.
func WriteFile(path string, f File) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(out, f); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
