package partition

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// FuzzReadManifest feeds arbitrary bytes as a directory's partitions.json, which a launcher and
// every graph server read from a volume or a bucket others may write: it must never panic, every
// refusal must wrap ErrManifest, and a manifest it accepts must describe as many bounds and files
// as partitions, each file named as the graph server will look for it.
func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(`{"version":1,"dataset":"d","nodes":4,"edges":6,"features":2,"classes":2,"parts":2,"method":"multilevel","bounds":[0,2,4],"quality":{},"files":[{"name":"` +
		graph.PartitionFileName(0, 2) + `","bytes":10,"checksum":"00000000"},{"name":"` + graph.PartitionFileName(1, 2) + `","bytes":10,"checksum":"00000000"}]}`))
	f.Add([]byte(`{"version":1,"parts":-1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestFileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(dir)
		if err != nil {
			if !errors.Is(err, ErrManifest) {
				t.Fatalf("ReadManifest: %v: does not wrap ErrManifest", err)
			}
			return
		}
		if m.Parts < 1 || len(m.Bounds) != m.Parts+1 || len(m.Files) != m.Parts {
			t.Fatalf("ReadManifest accepted %d partitions with %d bounds and %d files", m.Parts, len(m.Bounds), len(m.Files))
		}
		for p, file := range m.Files {
			if file.Name != graph.PartitionFileName(p, m.Parts) {
				t.Fatalf("ReadManifest accepted file %d named %q", p, file.Name)
			}
		}
	})
}
