package npy

import (
	"fmt"
	"strconv"
	"strings"
)

// parseHeader reads the dict literal of a .npy header: the keys 'descr', 'fortran_order' and
// 'shape', each exactly once, with a supported dtype and C order.
func parseHeader(h string) (*Array, error) {
	p := &lexer{s: strings.TrimRight(h, " \n")}
	if !p.take('{') {
		return nil, fmt.Errorf("want a dict, got %.40q", h)
	}
	a := &Array{}
	seen := map[string]bool{}
	for !p.take('}') {
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("key %q given twice", key)
		}
		seen[key] = true
		if !p.take(':') {
			return nil, fmt.Errorf("no ':' after %q", key)
		}
		switch key {
		case "descr":
			if a.DType, err = p.str(); err != nil {
				return nil, err
			}
			if _, ok := elemSize[a.DType]; !ok {
				return nil, fmt.Errorf("dtype %q: only %s, %s (float32, float64), %s, %s (int32, int64) and %s (bool) are supported",
					a.DType, Float32, Float64, Int32, Int64, Bool)
			}
		case "fortran_order":
			switch w := p.word(); w {
			case "False":
			case "True":
				return nil, fmt.Errorf("fortran_order True: only C order is supported")
			default:
				return nil, fmt.Errorf("fortran_order %q: want True or False", w)
			}
		case "shape":
			if a.Shape, err = p.tuple(); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unknown key %q", key)
		}
		if !p.take(',') && !p.peek('}') {
			return nil, fmt.Errorf("want ',' or '}' after %q", key)
		}
	}
	if p.skip(); p.i != len(p.s) {
		return nil, fmt.Errorf("text after the dict: %.40q", p.s[p.i:])
	}
	if len(seen) != 3 || a.DType == "" || a.Shape == nil {
		return nil, fmt.Errorf("want descr, fortran_order and shape, got %d keys", len(seen))
	}
	return a, nil
}

// lexer reads the tokens of a Python literal.
type lexer struct {
	s string
	i int
}

func (p *lexer) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// peek reports whether the next token is c.
func (p *lexer) peek(c byte) bool {
	p.skip()
	return p.i < len(p.s) && p.s[p.i] == c
}

// take consumes c if it is next.
func (p *lexer) take(c byte) bool {
	if p.peek(c) {
		p.i++
		return true
	}
	return false
}

// str reads a quoted string without escapes.
func (p *lexer) str() (string, error) {
	p.skip()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("want a quoted string at byte %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at byte %d", p.i)
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

// word reads a run of letters and digits.
func (p *lexer) word() string {
	p.skip()
	j := p.i
	for j < len(p.s) && (p.s[j] >= 'a' && p.s[j] <= 'z' || p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] >= '0' && p.s[j] <= '9') {
		j++
	}
	w := p.s[p.i:j]
	p.i = j
	return w
}

// tuple reads a tuple of non-negative integers: (), (n,), (n, m), …
func (p *lexer) tuple() ([]int, error) {
	if !p.take('(') {
		return nil, fmt.Errorf("shape: want a tuple at byte %d", p.i)
	}
	shape := []int{}
	for !p.take(')') {
		w := p.word()
		d, err := strconv.Atoi(w)
		if err != nil || d < 0 || d > 1<<40 {
			return nil, fmt.Errorf("shape: dimension %q", w)
		}
		shape = append(shape, d)
		if !p.take(',') && !p.peek(')') {
			return nil, fmt.Errorf("shape: want ',' or ')' at byte %d", p.i)
		}
	}
	return shape, nil
}
