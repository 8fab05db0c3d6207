package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// ManifestFileName is the name of the manifest written beside a directory's partition files.
const ManifestFileName = "partitions.json"

// ManifestVersion is the version of the manifest this build writes and reads.
const ManifestVersion = 1

// ErrManifest reports a directory of partition files that does not match its manifest, or a
// manifest that does not describe the partitioning asked for.
var ErrManifest = errors.New("partition files do not match their manifest")

// Manifest describes a directory of partition files — the dataset, how it was cut, and every
// file's size and checksum — so that a launcher checks the directory without reading the graph
// and each graph server checks the one file it reads.
type Manifest struct {
	Version  int            `json:"version"`
	Dataset  string         `json:"dataset"`
	Nodes    int            `json:"nodes"`
	Edges    int64          `json:"edges"` // adjacency entries
	Features int            `json:"features"`
	Classes  int            `json:"classes"`
	Parts    int            `json:"parts"`
	Method   Method         `json:"method,omitempty"`
	Bounds   []int64        `json:"bounds"` // part q owns the renumbered ids [Bounds[q], Bounds[q+1])
	Quality  Quality        `json:"quality"`
	Files    []ManifestFile `json:"files"`
}

// ManifestFile is one partition file of a Manifest.
type ManifestFile struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// Checksum is the CRC-32C in the file's header (graph.PartitionFileChecksum), 8 hex digits.
	Checksum string `json:"checksum"`
}

// writeManifest writes the manifest of the partition files of bounds in dir.
func writeManifest(dir string, s *source, bounds []int64, method Method, q Quality) error {
	m := Manifest{
		Version: ManifestVersion, Dataset: s.meta.Name, Nodes: len(s.degree), Edges: s.meta.NumEdges,
		Features: s.meta.NumFeatures, Classes: s.classes, Parts: len(bounds) - 1, Method: method, Bounds: bounds, Quality: q,
	}
	for p := range m.Parts {
		name := graph.PartitionFileName(p, m.Parts)
		sum, size, err := graph.PartitionFileChecksum(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		m.Files = append(m.Files, ManifestFile{Name: name, Bytes: size, Checksum: fmt.Sprintf("%08x", sum)})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("partition: manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFileName), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	return nil
}

// ReadManifest reads and checks the manifest of the partition directory dir. Its error wraps
// fs.ErrNotExist when dir has none.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("partition: %s: %v: %w", path, err, ErrManifest)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("partition: %s: %s: %w", path, fmt.Sprintf(format, args...), ErrManifest)
	}
	switch {
	case m.Version != ManifestVersion:
		return nil, bad("version %d, this build reads version %d", m.Version, ManifestVersion)
	case m.Parts < 1 || m.Parts > m.Nodes:
		return nil, bad("%d partitions of %d vertices", m.Parts, m.Nodes)
	case len(m.Bounds) != m.Parts+1 || len(m.Files) != m.Parts:
		return nil, bad("%d bounds and %d files for %d partitions", len(m.Bounds), len(m.Files), m.Parts)
	}
	for p, f := range m.Files {
		if want := graph.PartitionFileName(p, m.Parts); f.Name != want {
			return nil, bad("file %d is %q, want %q", p, f.Name, want)
		}
	}
	return &m, nil
}

// Require checks that m describes parts partitions.
func (m *Manifest) Require(dir string, parts int) error {
	if m.Parts != parts {
		return fmt.Errorf("partition: %s holds %d partitions of %s, want %d: %w", filepath.Join(dir, ManifestFileName), m.Parts, m.Dataset, parts, ErrManifest)
	}
	return nil
}

// CheckHeaders checks that every file m lists is in dir with its size and header checksum,
// reading only their headers.
func (m *Manifest) CheckHeaders(dir string) error {
	for _, f := range m.Files {
		path := filepath.Join(dir, f.Name)
		sum, size, err := graph.PartitionFileChecksum(path)
		if err != nil {
			return err
		}
		if got := fmt.Sprintf("%08x", sum); size != f.Bytes || got != f.Checksum {
			return fmt.Errorf("partition: %s: %d bytes, checksum %s; %s lists %d bytes, checksum %s: a file of another dataset or partitioning, or a damaged one: %w",
				path, size, got, ManifestFileName, f.Bytes, f.Checksum, ErrManifest)
		}
	}
	return nil
}

// CheckPart checks that d, read from the file at path (graph.ReadPartitionFile), is the
// partition m lists: the same dataset, the same partitioning and the same file.
func (m *Manifest) CheckPart(path string, d *graph.PartitionData) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("partition: %s: %s: %w", path, fmt.Sprintf(format, args...), ErrManifest)
	}
	switch meta := d.Meta; {
	case d.Parts != m.Parts:
		return bad("partition %d of %d, %s lists %d", d.Part, d.Parts, ManifestFileName, m.Parts)
	case meta.Name != m.Dataset || meta.NumNodes != m.Nodes || meta.NumEdges != m.Edges:
		return bad("holds dataset %s (%d vertices, %d directed edges), %s describes %s (%d vertices, %d directed edges)",
			meta.Name, meta.NumNodes, meta.NumEdges, ManifestFileName, m.Dataset, m.Nodes, m.Edges)
	case !slices.Equal(d.Bounds, m.Bounds):
		return bad("another partitioning of %s (bounds %v, %s lists %v)", m.Dataset, shortBounds(d.Bounds), ManifestFileName, shortBounds(m.Bounds))
	}
	sum, _, err := graph.PartitionFileChecksum(path)
	if err != nil {
		return err
	}
	if got, f := fmt.Sprintf("%08x", sum), m.Files[d.Part]; got != f.Checksum {
		return bad("checksum %s, %s lists %s", got, ManifestFileName, f.Checksum)
	}
	return nil
}

// HasManifest reports whether dir is a directory holding a manifest (or one that cannot be
// read, which ReadManifest then explains); a file, a prepared one say, holds none.
func HasManifest(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestFileName))
	return err == nil || !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR)
}
