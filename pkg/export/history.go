package export

import (
	"bytes"
	"context"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Point is one epoch of a learning curve; ValAcc is nil where it was not evaluated.
type Point struct {
	Epoch   int      `json:"epoch"`
	Loss    float64  `json:"loss"`
	ValAcc  *float64 `json:"val_accuracy,omitempty"`
	Seconds float64  `json:"seconds"`
}

// History is history.json: a report R of the run that wrote it and the curve of the exported run.
type History[R any] struct {
	Report R       `json:"report"`
	Seed   uint64  `json:"seed"`
	Curve  []Point `json:"curve"`
}

// CurvesPNG plots the training loss and validation accuracy of a curve side by side as a PNG.
func CurvesPNG(curve []Point, dataset string) ([]byte, error) {
	loss := make(plotter.XYs, 0, len(curve))
	acc := make(plotter.XYs, 0, len(curve))
	for _, r := range curve {
		loss = append(loss, plotter.XY{X: float64(r.Epoch), Y: r.Loss})
		if r.ValAcc != nil {
			acc = append(acc, plotter.XY{X: float64(r.Epoch), Y: 100 * *r.ValAcc})
		}
	}
	lossPlot, err := linePlot(dataset+": training loss", "loss", loss)
	if err != nil {
		return nil, err
	}
	accPlot, err := linePlot(dataset+": validation accuracy", "accuracy (%)", acc)
	if err != nil {
		return nil, err
	}
	img := vgimg.New(12*vg.Inch, 4.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{lossPlot, accPlot}}, tiles, dc)
	lossPlot.Draw(canvases[0][0])
	accPlot.Draw(canvases[0][1])
	var b bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&b); err != nil {
		return nil, fmt.Errorf("plot %s: %w", dataset, err)
	}
	return b.Bytes(), nil
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

// PutHistory publishes history.json and the curves of its run (curves.png).
func PutHistory[R any](ctx context.Context, w *Writer, h History[R], dataset string) error {
	if err := w.PutJSON(ctx, HistoryFile, h); err != nil {
		return err
	}
	png, err := CurvesPNG(h.Curve, dataset)
	if err != nil {
		return err
	}
	return w.Put(ctx, CurvesFile, png)
}
