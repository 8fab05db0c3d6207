package partition

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestForServers: a dataset that is not partitioned is cut into work/partitions; a directory
// dorylus prepare --partitions wrote is taken as it is, made absolute; one of another part
// count is refused naming the flag.
func TestForServers(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	dir, m, err := ForServers(ctx, "cora", work, 2)
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(work, "partitions") || m.Parts != 2 || m.Nodes != 2708 || m.Dataset != "cora" {
		t.Errorf("cut: %s, manifest %+v; want %s of 2 parts of cora", dir, m, filepath.Join(work, "partitions"))
	}
	prepared := filepath.Join(t.TempDir(), "cora-2")
	if err := Cut(ctx, "cora", prepared, 2, DefaultMethod, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(prepared))
	other := t.TempDir()
	dir, m, err = ForServers(ctx, "cora-2", other, 2)
	if err != nil {
		t.Fatal(err)
	}
	if dir != prepared || m.Parts != 2 {
		t.Errorf("prepared: %s (%d parts), want %s", dir, m.Parts, prepared)
	}
	if HasFiles(filepath.Join(other, "partitions")) {
		t.Error("a prepared directory was cut again")
	}
	if _, _, err := ForServers(ctx, "cora-2", other, 3); err == nil || !strings.Contains(err.Error(), "--graph-servers 3") {
		t.Errorf("3 servers on 2 parts: %v", err)
	}
}
