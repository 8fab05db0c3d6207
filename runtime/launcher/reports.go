package launcher

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// Report is one line of graph server 0's progress, decoded, or why it could not be.
type Report struct {
	Event graphserver.Event
	Err   error
}

// Reports decodes the progress graph server 0 writes (graphserver.Config.Events: JSON lines)
// into Reports on C as they are written. C closes once CloseWrite was called and every line
// written before is decoded, or at Close.
type Reports struct {
	C    <-chan Report
	c    chan Report
	r    *io.PipeReader
	w    *io.PipeWriter
	stop chan struct{}
	once sync.Once
}

// NewReports returns a decoder waiting for its first line.
func NewReports() *Reports {
	r, w := io.Pipe()
	c := make(chan Report)
	rs := &Reports{C: c, c: c, r: r, w: w, stop: make(chan struct{})}
	go rs.read()
	return rs
}

// Write implements io.Writer: graph server 0's lines go here. It blocks until the line is
// decoded and taken from C.
func (rs *Reports) Write(p []byte) (int, error) { return rs.w.Write(p) }

// CloseWrite says that no more lines come.
func (rs *Reports) CloseWrite() { rs.w.Close() }

// Close stops decoding: C closes, and later writes fail.
func (rs *Reports) Close() {
	rs.once.Do(func() {
		close(rs.stop)
		rs.r.Close()
	})
}

// read decodes every line; one that is no event is reported with an error, and the lines
// after it are decoded still.
func (rs *Reports) read() {
	defer close(rs.c)
	sc := bufio.NewScanner(rs.r)
	for sc.Scan() {
		var rep Report
		if err := json.Unmarshal(sc.Bytes(), &rep.Event); err != nil {
			rep = Report{Err: fmt.Errorf("graph-server 0 wrote %q: %w", sc.Text(), err)}
		}
		select {
		case rs.c <- rep:
		case <-rs.stop:
			return
		}
	}
}
