package binfmt

import (
	"strings"
	"testing"
)

func TestElements(t *testing.T) {
	for _, c := range []struct {
		shape []int
		want  int64
		err   string
	}{
		{nil, 1, ""},
		{[]int{3, 4}, 12, ""},
		{[]int{0, 1 << 62}, 0, ""},
		{[]int{2, -1}, 0, "negative"},
		{[]int{1 << 31, 1 << 31}, 0, "too large"},
	} {
		n, err := Elements(c.shape, 4)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want an error saying %q", c.shape, err, c.err)
			}
			continue
		}
		if err != nil || n != c.want {
			t.Errorf("%v: %d, %v; want %d", c.shape, n, err, c.want)
		}
	}
}
