package graph

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

const (
	readBufSize = 256 << 10
	maxLineLen  = 64 << 20 // longest line accepted (a feature line of ~10M nonzeros)
)

// lineReader yields the lines of one file without allocating per line.
type lineReader struct {
	br   *bufio.Reader
	name string // file name used in errors
	line int    // 1-based number of the line last returned
	long []byte // reused buffer for lines longer than the bufio buffer
	gz   bool   // br decompresses a gzip stream
}

func newLineReader(r io.Reader, name string) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufSize), name: name}
}

// next returns the next line without its '\n'; the slice is valid until the next call. At the
// end of the file it returns io.EOF; any other error is a *ParseError.
func (lr *lineReader) next() ([]byte, error) {
	b, err := lr.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		lr.long = append(lr.long[:0], b...)
		for err == bufio.ErrBufferFull {
			if len(lr.long) > maxLineLen {
				return nil, lr.errAt(lr.line+1, 0, "line longer than %d bytes", maxLineLen)
			}
			b, err = lr.br.ReadSlice('\n')
			lr.long = append(lr.long, b...)
		}
		b = lr.long
	}
	if err != nil && err != io.EOF {
		return nil, lr.readErr(err)
	}
	if len(b) == 0 {
		return nil, io.EOF
	}
	lr.line++
	if b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return nil, lr.errf(len(b), "carriage return: the format uses \\n line ends")
	}
	return b, nil
}

// each calls fn on every remaining line, stopping at the first error.
func (lr *lineReader) each(fn func(line []byte) error) error {
	for {
		line, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err == nil {
			err = fn(line)
		}
		if err != nil {
			return err
		}
	}
}

// readErr wraps an error of the underlying reader (I/O or decompression) with the line it hit.
func (lr *lineReader) readErr(err error) error {
	msg := "read error"
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "truncated file (unexpected end of compressed data)"
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader), errors.As(err, new(flate.CorruptInputError)):
		msg = "corrupt gzip data"
	}
	return &ParseError{File: lr.name, Line: lr.line + 1, Msg: msg, Err: err}
}

// errf returns a *ParseError at the current line and the given 1-based column (0: none).
func (lr *lineReader) errf(col int, format string, args ...any) error {
	return lr.errAt(lr.line, col, format, args...)
}

func (lr *lineReader) errAt(line, col int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if err := lr.corrupt(); err != nil {
		what := "corrupt gzip data"
		if errors.Is(err, io.ErrUnexpectedEOF) {
			what = "truncated gzip data"
		}
		return &ParseError{File: lr.name, Line: line, Msg: what + " (it decompressed to a line that does not parse: " + msg + ")", Err: err}
	}
	return &ParseError{File: lr.name, Line: line, Column: col, Msg: msg}
}

// corrupt returns the error of a gzipped file's stream, nil for a plain file or a sound
// stream. Corrupt compressed data may decompress to garbage, which fails to parse before the
// stream's checksum, at its end, fails: a line that does not parse is checked so, by reading
// the rest of the stream, once, so that the error says the file is corrupt, not which column
// the garbage broke.
func (lr *lineReader) corrupt() error {
	if !lr.gz {
		return nil
	}
	lr.gz = false
	_, err := io.Copy(io.Discard, lr.br)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader), errors.As(err, new(flate.CorruptInputError)):
		return err
	}
	return nil
}

// maxParsedInt bounds every integer the parsers accept, far above any valid id, so that the
// accumulation cannot overflow.
const maxParsedInt = 1 << 53

// parseUint parses the decimal digits at the start of b[i:]. It returns the value and the index
// after the last digit; ok is false when there is no digit or the number exceeds maxParsedInt.
func parseUint(b []byte, i int) (v int64, next int, ok bool) {
	start := i
	for i < len(b) {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		v = v*10 + int64(c)
		if v > maxParsedInt {
			return 0, i, false
		}
		i++
	}
	return v, i, i > start
}

// parseInt parses an optionally negative decimal integer that must span all of b.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	v, next, ok := parseUint(b, i)
	if !ok || next != len(b) {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseValue parses a feature value: an unsigned integer exactly, anything else that looks like a
// decimal floating-point number through strconv.ParseFloat, correctly rounded to float32.
func parseValue(b []byte) (float32, error) {
	if len(b) == 0 {
		return 0, errors.New("empty value")
	}
	if len(b) <= 15 {
		if v, next, ok := parseUint(b, 0); ok && next == len(b) {
			return float32(v), nil // v < 10^15 converts exactly and rounds once
		}
	}
	for _, c := range b {
		if (c < '0' || c > '9') && c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E' {
			return 0, fmt.Errorf("value %s is not a decimal number", quoteToken(b))
		}
	}
	// string(b) does not escape (strconv clones it into its errors), so for the short values of
	// the format (up to 32 bytes) the conversion uses a stack buffer and does not allocate.
	f, err := strconv.ParseFloat(string(b), 32)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("value %s overflows float32", quoteToken(b))
		}
		return 0, fmt.Errorf("value %s is not a decimal number", quoteToken(b))
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("value %s is not finite", quoteToken(b))
	}
	return float32(f), nil
}
