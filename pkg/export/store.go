package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
)

// ErrCorrupt is wrapped by the error a reader returns for a file whose size or checksum differs
// from what the card or manifest lists.
var ErrCorrupt = errors.New("corrupt")

// Writer publishes the files of an export to a store and records their sizes and checksums.
type Writer struct {
	Store checkpoint.Store
	files []File
}

// Put publishes one file whole and records it.
func (w *Writer) Put(ctx context.Context, name string, data []byte) error {
	if err := w.Store.Put(ctx, name, data); err != nil {
		return fmt.Errorf("export %s to %s: %w", name, w.Store, err)
	}
	sum := sha256.Sum256(data)
	w.files = append(w.files, File{Name: name, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	return nil
}

// Names returns the paths, from the top of the location, of the files published so far, in
// order: a Target's are in its version's folder, but for the card and the manifest.
func (w *Writer) Names() []string {
	out := make([]string, len(w.files))
	v := versionOf(w.Store)
	for i, f := range w.files {
		out[i] = f.Name
		if v != "" && !top(f.Name) {
			out[i] = v + "/" + f.Name
		}
	}
	return out
}

// Files returns the files published so far, in order.
func (w *Writer) Files() []File { return append([]File(nil), w.files...) }

// PutJSON publishes v as an indented JSON file.
func (w *Writer) PutJSON(ctx context.Context, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("export %s: %w", name, err)
	}
	return w.Put(ctx, name, append(b, '\n'))
}

// PutCard publishes the card listing every file published so far and their version; call it
// last: to a Target, it switches the location to the new version.
func (w *Writer) PutCard(ctx context.Context, c Card) error {
	c.Format, c.Version, c.Files = CardFormat, versionOf(w.Store), w.Files()
	if err := c.Validate(); err != nil {
		return err
	}
	return w.PutJSON(ctx, CardFile, c)
}

// PutManifest publishes the manifest of a prediction run listing every file published so far
// and their version; call it last: to a Target, it switches the location to the new version.
func (w *Writer) PutManifest(ctx context.Context, m Manifest) error {
	m.Version, m.Files = versionOf(w.Store), w.Files()
	return w.PutJSON(ctx, ManifestFile, m)
}

// Check returns an error wrapping ErrCorrupt when data is not the file f lists.
func Check(data []byte, f File, where string) error {
	if int64(len(data)) != f.Bytes {
		return fmt.Errorf("%s/%s: %w: %d bytes, the listing says %d (truncated?)", where, f.Name, ErrCorrupt, len(data), f.Bytes)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.SHA256 {
		return fmt.Errorf("%s/%s: %w: SHA-256 %x, the listing says %s", where, f.Name, ErrCorrupt, sum, f.SHA256)
	}
	return nil
}

// Model is a model read back from a store.
type Model struct {
	Card    Card
	Tensors []safetensors.Tensor
}

// Read reads the card and the weights of the model in st (of the version the card names),
// checking the weights' size and SHA-256 against the card before decoding them.
func Read(ctx context.Context, st checkpoint.Store) (*Model, error) {
	b, err := st.Get(ctx, CardFile)
	if err != nil {
		return nil, fmt.Errorf("read the model in %s: %w", st, err)
	}
	var c Card
	if err := decodeJSON(b, &c, fmt.Sprintf("%s/%s", st, CardFile)); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", st, CardFile, err)
	}
	f, _ := c.File(WeightsFile) // Validate checked it is listed
	files, err := Files(st, c.Version)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", st, CardFile, err)
	}
	b, err = files.Get(ctx, WeightsFile)
	if err != nil {
		return nil, fmt.Errorf("read the model in %s: %w", st, err)
	}
	if err := Check(b, f, files.String()); err != nil {
		return nil, err
	}
	sf, err := safetensors.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", files, WeightsFile, err)
	}
	return &Model{Card: c, Tensors: sf.Tensors}, nil
}
