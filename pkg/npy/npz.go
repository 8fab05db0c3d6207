package npy

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// maxDeflateRatio bounds the ratio of a deflated member's size to its compressed size (deflate
// cannot do better than about 1032:1), so that a forged size cannot make Read allocate more
// than the archive could hold.
const maxDeflateRatio = 1032

// Archive is an open .npz file: a zip archive of .npy members, as np.savez (stored) and
// np.savez_compressed (deflated) write them.
type Archive struct {
	members map[string]*zip.File
}

// OpenArchive opens the .npz file of size bytes at r. Every member must be a file named
// NAME.npy, each name once.
func OpenArchive(r io.ReaderAt, size int64) (*Archive, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: not a .npz (zip) archive: %v", ErrFormat, err)
	}
	a := &Archive{members: make(map[string]*zip.File, len(zr.File))}
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		switch {
		case !ok || name == "" || f.FileInfo().IsDir():
			return nil, fmt.Errorf("%w: member %q is not a NAME.npy array", ErrFormat, f.Name)
		case a.members[name] != nil:
			return nil, fmt.Errorf("%w: member %q appears twice", ErrFormat, f.Name)
		case f.Method != zip.Store && f.Method != zip.Deflate:
			return nil, fmt.Errorf("%w: member %q: compression method %d (np.savez stores, np.savez_compressed deflates)", ErrFormat, f.Name, f.Method)
		case f.UncompressedSize64 > uint64(size)*maxDeflateRatio:
			return nil, fmt.Errorf("%w: member %q claims %d bytes, more than the archive of %d bytes can hold", ErrFormat, f.Name, f.UncompressedSize64, size)
		}
		a.members[name] = f
	}
	return a, nil
}

// Names returns the arrays' names (the members' without .npy), sorted.
func (a *Archive) Names() []string {
	names := make([]string, 0, len(a.members))
	for n := range a.members {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Has reports whether the archive holds array name.
func (a *Archive) Has(name string) bool { return a.members[name] != nil }

// Read decodes array name (member name.npy), verifying the member's checksum.
func (a *Archive) Read(name string) (*Array, error) {
	f := a.members[name]
	if f == nil {
		return nil, fmt.Errorf("npy: no member %s.npy", name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: member %s: %v", ErrFormat, f.Name, err)
	}
	defer rc.Close()
	arr, err := Read(rc, int64(f.UncompressedSize64))
	if err == nil {
		// The zip reader checks the member's CRC-32 when it reaches the end.
		var one [1]byte
		if _, end := rc.Read(one[:]); !errors.Is(end, io.EOF) {
			if end == nil {
				end = errors.New("data after the declared size")
			}
			err = fmt.Errorf("%w: %v", ErrFormat, end)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", f.Name, err)
	}
	return arr, nil
}

// EncodeArchive returns the .npz file holding each array of arrays as member NAME.npy, stored
// uncompressed as np.savez writes them, in the order of names.
func EncodeArchive(names []string, arrays []*Array) ([]byte, error) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i, name := range names {
		data, err := Encode(arrays[i])
		if err != nil {
			return nil, fmt.Errorf("npy: array %s: %w", name, err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
