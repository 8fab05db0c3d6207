package source

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// unpack extracts the tar.gz archive at src into dst (replacing an earlier extraction whole,
// through a temporary folder renamed into place) and returns the dataset folder: dst, or its
// only entry when the archive holds a single folder. Entries that are not regular files or
// folders, or whose paths leave dst, are refused.
func unpack(src, dst string) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("%s is neither a prepared dataset file nor a tar.gz archive: %w", filepath.Base(src), err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // after a successful rename it no longer exists
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("archive %s: %w", filepath.Base(src), err)
		}
		name := path.Clean("/" + h.Name)[1:]
		if name == "" {
			continue
		}
		if strings.HasPrefix(h.Name, "/") || strings.Contains("/"+h.Name+"/", "/../") {
			return "", fmt.Errorf("archive %s: entry %q leaves the archive's folder", filepath.Base(src), h.Name)
		}
		p := filepath.Join(tmp, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeEntry(p, tr)
		default:
			return "", fmt.Errorf("archive %s: entry %q is not a regular file or folder", filepath.Base(src), h.Name)
		}
		if err != nil {
			return "", fmt.Errorf("archive %s: entry %q: %w", filepath.Base(src), h.Name, err)
		}
	}
	if err := os.RemoveAll(dst); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dst)
	if err == nil && len(entries) == 1 && entries[0].IsDir() {
		return filepath.Join(dst, entries[0].Name()), nil
	}
	return dst, err
}

func writeEntry(p string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	out, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
