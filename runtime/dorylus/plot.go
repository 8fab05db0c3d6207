package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotCurves writes the training loss and validation accuracy of one run, side by side, to a PNG.
func plotCurves(path string, curve []epochRecord, dataset string) error {
	loss := make(plotter.XYs, 0, len(curve))
	acc := make(plotter.XYs, 0, len(curve))
	for _, r := range curve {
		loss = append(loss, plotter.XY{X: float64(r.Epoch), Y: r.Loss})
		if !math.IsNaN(r.ValAcc) {
			acc = append(acc, plotter.XY{X: float64(r.Epoch), Y: 100 * r.ValAcc})
		}
	}
	lossPlot, err := linePlot(dataset+": training loss", "loss", loss)
	if err != nil {
		return err
	}
	accPlot, err := linePlot(dataset+": validation accuracy", "accuracy (%)", acc)
	if err != nil {
		return err
	}
	img := vgimg.New(12*vg.Inch, 4.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{lossPlot, accPlot}}, tiles, dc)
	lossPlot.Draw(canvases[0][0])
	accPlot.Draw(canvases[0][1])
	if err := savePNG(path, img); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

func linePlot(title, ylabel string, xys plotter.XYs) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	if len(xys) > 0 {
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", title, err)
		}
		p.Add(line)
	}
	return p, nil
}

// savePNG writes img as a PNG file, atomically: a partial file never appears at path.
func savePNG(path string, img *vgimg.Canvas) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plot-*.png")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
