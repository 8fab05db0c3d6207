package tensor

import "fmt"

// Dense is a row-major float32 matrix: element (i, j) is Data[i*Cols+j].
type Dense struct {
	Rows, Cols int
	Data       []float32
}

// NewDense returns a zeroed rows×cols matrix. Blocks of 4 MiB and more are advised to use
// transparent huge pages (see AdviseHugePages).
func NewDense(rows, cols int) *Dense {
	d := &Dense{Rows: rows, Cols: cols, Data: make([]float32, rows*cols)}
	AdviseHugePages(d.Data)
	return d
}

// Row returns row i as a slice that aliases the matrix.
func (d *Dense) Row(i int) []float32 { return d.Data[i*d.Cols : (i+1)*d.Cols] }

// RowSlice returns rows [lo, hi) as a matrix that aliases d.
func (d *Dense) RowSlice(lo, hi int) *Dense {
	return &Dense{Rows: hi - lo, Cols: d.Cols, Data: d.Data[lo*d.Cols : hi*d.Cols]}
}

// Zero sets every element to 0.
func (d *Dense) Zero() { clear(d.Data) }

// Clone returns a deep copy.
func (d *Dense) Clone() *Dense {
	return &Dense{Rows: d.Rows, Cols: d.Cols, Data: append([]float32(nil), d.Data...)}
}

// Validate reports an error when len(Data) does not match the shape.
func (d *Dense) Validate() error {
	if d.Rows < 0 || d.Cols < 0 || len(d.Data) != d.Rows*d.Cols {
		return fmt.Errorf("dense %dx%d has %d elements", d.Rows, d.Cols, len(d.Data))
	}
	return nil
}
