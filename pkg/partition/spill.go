package partition

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"unsafe"
)

// spillAbove is the size, in adjacency entries of the fine graph (a bound on the coarse one's),
// above which a coarse graph is built on disk (8 bytes an entry: 1 GiB). A variable so that tests
// can force spilling.
var spillAbove int64 = 1 << 27

// sink stores the rows of a coarse graph as contract produces them, in order.
type sink interface {
	write(adj, ew []int32)
	finish() error // completes the graph's adj and ew (its offsets are complete by then)
	close()        // releases what finish did not
}

// newSink returns where contract stores the rows of cg, which has at most bound entries: arrays
// of that capacity, trimmed by finish, or, above spillAbove, two temporary files read back into
// exact arrays by finish.
func (c *coarsener) newSink(cg *wgraph, bound int64) (sink, error) {
	m := bound
	if m <= spillAbove {
		cg.adj, cg.ew = make([]int32, 0, m), make([]int32, 0, m)
		return &memSink{g: cg}, nil
	}
	s := &fileSink{g: cg}
	for i := range s.f {
		f, err := os.CreateTemp(c.spillDir, "dorylus-partition-level-*")
		if err != nil {
			s.close()
			return nil, fmt.Errorf("partition: spill a coarse level of %d entries: %w", m, err)
		}
		s.f[i] = f
		s.w[i] = bufio.NewWriterSize(f, 1<<20)
	}
	return s, nil
}

// memSink appends to the graph's arrays.
type memSink struct{ g *wgraph }

func (s *memSink) write(adj, ew []int32) {
	s.g.adj = append(s.g.adj, adj...)
	s.g.ew = append(s.g.ew, ew...)
}

// finish copies the arrays to exact size when the bound left much unused.
func (s *memSink) finish() error {
	if g := s.g; len(g.adj) < cap(g.adj)*9/10 {
		g.adj, g.ew = slices.Clip(slices.Clone(g.adj)), slices.Clip(slices.Clone(g.ew))
	}
	return nil
}
func (s *memSink) close() {}

// fileSink writes the neighbours and the weights to one temporary file each.
type fileSink struct {
	g   *wgraph
	f   [2]*os.File
	w   [2]*bufio.Writer
	err error
}

// int32Bytes returns the bytes of s (host byte order: the files never leave the process).
func int32Bytes(s []int32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

func (s *fileSink) write(adj, ew []int32) {
	for i, x := range [2][]int32{adj, ew} {
		if _, err := s.w[i].Write(int32Bytes(x)); err != nil && s.err == nil {
			s.err = err
		}
	}
}

func (s *fileSink) finish() error {
	m := s.g.xadj[s.g.n()]
	dst := [2]*[]int32{&s.g.adj, &s.g.ew}
	for i := range s.f {
		if s.err == nil {
			s.err = s.w[i].Flush()
		}
		if s.err != nil {
			return fmt.Errorf("partition: spill a coarse level to %s: %w", s.f[i].Name(), s.err)
		}
	}
	for i := range s.f {
		*dst[i] = make([]int32, m)
		if _, err := s.f[i].ReadAt(int32Bytes(*dst[i]), 0); err != nil && err != io.EOF {
			return fmt.Errorf("partition: read back a coarse level from %s: %w", s.f[i].Name(), err)
		}
	}
	return nil
}

func (s *fileSink) close() {
	for _, f := range s.f {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
}
