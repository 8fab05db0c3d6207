package graph

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestVerifyPrepared(t *testing.T) {
	b := preparedBytes(t, loadTiny(t))
	info, err := VerifyPrepared(bytes.NewReader(b), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if info != (PreparedInfo{Part: 0, Parts: 1, Size: int64(len(b))}) {
		t.Fatalf("info %+v for a %d-byte whole-graph file", info, len(b))
	}
	labels := tableOf(t, b)
	var lab sectionEntry
	for _, e := range labels {
		if e.kind == secLabels {
			lab = e
		}
	}
	flipped := bytes.Clone(b)
	flipped[lab.offset] ^= 1
	cases := map[string]struct {
		data []byte
		want error
		msg  string
	}{
		"flipped label":  {flipped, ErrCorrupt, "section labels: checksum mismatch"},
		"truncated":      {b[:len(b)-3], ErrCorrupt, "truncated"},
		"trailing bytes": {append(bytes.Clone(b), 0), ErrCorrupt, "trailing data"},
		"short header":   {b[:40], ErrCorrupt, "inside the header"},
		"not prepared":   {[]byte("{\"name\": \"cora\"}\n"), ErrNotPrepared, "bad magic"},
	}
	for name, c := range cases {
		_, err := VerifyPrepared(bytes.NewReader(c.data), "tiny")
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "tiny") {
			t.Errorf("%s: got %v, want %v mentioning %q and the name", name, err, c.want, c.msg)
		}
	}
}
