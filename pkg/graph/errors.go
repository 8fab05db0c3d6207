package graph

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNoFeatures reports a dataset that ships no node features (PubMed) where features are needed.
	ErrNoFeatures = errors.New("dataset has no node features")
	// ErrMalformed is matched by every *ParseError: a text dataset file that breaks the format.
	ErrMalformed = errors.New("malformed dataset file")
	// ErrInvalid reports a Dataset that breaks one of the invariants Validate checks.
	ErrInvalid = errors.New("invalid dataset")
	// ErrNotPrepared reports a file that does not start with the prepared-format magic.
	ErrNotPrepared = errors.New("not a prepared dataset file")
	// ErrUnsupportedVersion reports a prepared file of a format version this build cannot read.
	ErrUnsupportedVersion = errors.New("unsupported prepared format version")
	// ErrCorrupt reports a prepared file that is truncated, inconsistent or fails a checksum.
	ErrCorrupt = errors.New("corrupt prepared dataset file")
)

// ParseError describes malformed input in one file of a plain-text dataset.
type ParseError struct {
	File   string // the file, as named to the loader (for example "cora/edges.txt")
	Line   int    // 1-based line; 0 when the problem concerns the file as a whole
	Column int    // 1-based byte column of the offending token; 0 when not applicable
	Msg    string // what is wrong
	Err    error  // the underlying cause (an I/O or gzip error), or nil
}

// Error formats the error as "graph: load FILE line L, column C: MSG".
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("graph: load ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ", column %d", e.Column)
		}
	}
	return finish(&b, e.Msg, e.Err)
}

// finish appends ": msg" and, when cause is set, ": cause" to the location b holds, and
// returns the whole message.
func finish(b *strings.Builder, msg string, cause error) string {
	b.WriteString(": ")
	b.WriteString(msg)
	if cause != nil {
		b.WriteString(": ")
		b.WriteString(cause.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *ParseError) Unwrap() error { return e.Err }

// Is reports whether target is ErrMalformed.
func (e *ParseError) Is(target error) bool { return target == ErrMalformed }

// invalidf returns an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("graph: %w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// quoteToken quotes b for an error message, shortened when long.
func quoteToken(b []byte) string {
	const max = 40
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

// ArrayError describes a NumPy array of a dataset that breaks what the loader needs.
type ArrayError struct {
	File  string // the .npy or .npz file, as named to the loader
	Array string // the array's name (edge_index, x, y, train_mask, ...)
	Index []int  // the offending element's index; nil when the problem concerns the array as a whole
	Msg   string // what is wrong
	Err   error  // the underlying cause (an npy format error), or nil
}

// Error formats the error as "graph: load FILE: array NAME[I, J]: MSG".
func (e *ArrayError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph: load %s: array %s", e.File, e.Array)
	if e.Index != nil {
		b.WriteByte('[')
		for i, v := range e.Index {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprint(&b, v)
		}
		b.WriteByte(']')
	}
	return finish(&b, e.Msg, e.Err)
}

// Unwrap returns the underlying cause.
func (e *ArrayError) Unwrap() error { return e.Err }

// Is reports whether target is ErrMalformed.
func (e *ArrayError) Is(target error) bool { return target == ErrMalformed }
