package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dorylus-gnn/dorylus/pkg/export"
)

// plotCurves writes the training loss and validation accuracy of one run, side by side, to a
// PNG, atomically: a partial file never appears at path.
func plotCurves(path string, curve []epochRecord, dataset string) error {
	png, err := export.CurvesPNG(points(curve), dataset)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plot-*.png")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(png); err != nil {
		tmp.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}
