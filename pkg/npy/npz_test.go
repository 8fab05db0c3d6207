package npy

import (
	"archive/zip"
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func testArrays() ([]string, []*Array) {
	return []string{"x", "y"}, []*Array{
		{DType: Float32, Shape: []int{2, 2}, Float32s: []float32{1, 2, 3, 4}},
		{DType: Int64, Shape: []int{2}, Int64s: []int64{0, 1}},
	}
}

// zipOf returns a zip archive of the given members, deflated or stored.
func zipOf(t testing.TB, method uint16, members map[string][]byte, order ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range order {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(members[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestArchiveRoundTrip(t *testing.T) {
	names, arrays := testArrays()
	stored, err := EncodeArchive(names, arrays)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := Encode(arrays[0])
	y, _ := Encode(arrays[1])
	deflated := zipOf(t, zip.Deflate, map[string][]byte{"x.npy": x, "y.npy": y}, "x.npy", "y.npy")
	for what, b := range map[string][]byte{"stored (np.savez)": stored, "deflated (np.savez_compressed)": deflated} {
		a, err := OpenArchive(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(a.Names(), names) || !a.Has("x") || a.Has("z") {
			t.Errorf("%s: names %v", what, a.Names())
		}
		for i, n := range names {
			got, err := a.Read(n)
			if err != nil || !sameArray(got, arrays[i]) {
				t.Errorf("%s: %s = %+v, %v; want %+v", what, n, got, err, arrays[i])
			}
		}
		if _, err := a.Read("z"); err == nil || !strings.Contains(err.Error(), "no member z.npy") {
			t.Errorf("%s: missing member: %v", what, err)
		}
	}
}

func TestArchiveRefuses(t *testing.T) {
	x, _ := EncodeInt32([]int{2}, []int32{1, 2})
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"not a zip":  {x, "not a .npz (zip) archive"},
		"not .npy":   {zipOf(t, zip.Store, map[string][]byte{"x.txt": x}, "x.txt"), `member "x.txt" is not a NAME.npy array`},
		"twice":      {zipOf(t, zip.Store, map[string][]byte{"x.npy": x}, "x.npy", "x.npy"), `member "x.npy" appears twice`},
		"not an npy": {zipOf(t, zip.Store, map[string][]byte{"x.npy": []byte("hello")}, "x.npy"), "member x.npy: npy: malformed file: no .npy magic"},
		"truncated":  {zipOf(t, zip.Store, map[string][]byte{"x.npy": x[:len(x)-1]}, "x.npy"), "member x.npy: npy: malformed file: shape [2] of <i4 takes 8 bytes of data, the file has 7"},
	} {
		_, err := OpenArchive(bytes.NewReader(c.b), int64(len(c.b)))
		if err == nil {
			a, _ := OpenArchive(bytes.NewReader(c.b), int64(len(c.b)))
			_, err = a.Read("x")
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrFormat saying %q", name, err, c.want)
		}
	}
	// A flipped data byte fails the member's CRC-32.
	b := zipOf(t, zip.Store, map[string][]byte{"x.npy": x}, "x.npy")
	i := bytes.Index(b, x) + len(x) - 1
	b[i] ^= 1
	a, err := OpenArchive(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Read("x"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("corrupt member: %v, want a checksum error", err)
	}
}

// FuzzArchive checks that no input makes OpenArchive or Read panic, that every error wraps
// ErrFormat, and that what they accept encodes back to an archive of the same arrays.
func FuzzArchive(f *testing.F) {
	names, arrays := testArrays()
	b, err := EncodeArchive(names, arrays)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := OpenArchive(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		names := a.Names()
		arrays := make([]*Array, len(names))
		for i, n := range names {
			if arrays[i], err = a.Read(n); err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("error %v does not wrap ErrFormat", err)
				}
				return
			}
		}
		again, err := EncodeArchive(names, arrays)
		if err != nil {
			t.Fatal(err)
		}
		back, err := OpenArchive(bytes.NewReader(again), int64(len(again)))
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range names {
			if got, err := back.Read(n); err != nil || !sameArray(got, arrays[i]) {
				t.Fatalf("%s: %+v, %v after the round trip; want %+v", n, got, err, arrays[i])
			}
		}
	})
}
