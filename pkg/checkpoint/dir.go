package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Dir is a folder holding checkpoints.
type Dir string

// String returns the folder.
func (d Dir) String() string { return string(d) }

// Put writes data under a temporary name, syncs it, renames it into place and syncs the folder.
func (d Dir) Put(_ context.Context, name string, data []byte) error {
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	f, err := os.CreateTemp(string(d), ".tmp-"+name+"-*")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(string(d), name))
	}
	if err == nil {
		err = syncDir(string(d))
	}
	if err != nil {
		return fmt.Errorf("checkpoint: write %s: %w", filepath.Join(string(d), name), err)
	}
	return nil
}

func syncDir(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Get reads an object.
func (d Dir) Get(_ context.Context, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(string(d), name))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return b, nil
}

// List returns the names of the files in the folder; a missing folder holds nothing.
func (d Dir) List(context.Context) ([]string, error) { return d.entries(false) }

// Sub returns the subfolder name.
func (d Dir) Sub(name string) Store { return Dir(filepath.Join(string(d), name)) }

// Folders returns the names of the subfolders; a missing folder holds none.
func (d Dir) Folders(context.Context) ([]string, error) { return d.entries(true) }

// entries returns the names of the subfolders (folders) or of the other entries.
func (d Dir) entries(folders bool) ([]string, error) {
	ents, err := os.ReadDir(string(d))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() == folders {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Delete removes an object, or an empty subfolder; a missing one is not an error.
func (d Dir) Delete(_ context.Context, name string) error {
	if err := os.Remove(filepath.Join(string(d), name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
