package paramserver

import (
	"slices"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// TestVersionsKeep makes versions of two graph servers and checks, after every report, that
// exactly the newest and the versions some graph server may still read are held: nothing is
// dropped before both have reported, a stale report changes nothing, and a restart (forget)
// keeps everything until both report again.
func TestVersionsKeep(t *testing.T) {
	w := func() []*tensor.Dense { return []*tensor.Dense{tensor.NewDense(1, 1)} }
	vs := newVersions(2, 3, w())
	for range 5 {
		vs.add(w())
	}
	held := func(want ...uint64) {
		t.Helper()
		if got := vs.list(); !slices.Equal(got, want) {
			t.Fatalf("held %v, want %v", got, want)
		}
	}
	if vs.newest != 8 {
		t.Fatalf("newest %d after 5 updates from 3, want 8", vs.newest)
	}
	held(3, 4, 5, 6, 7, 8)
	vs.note(0, &rpc.Keep{Seq: 1, Pinned: []uint64{4}, Newest: 7})
	held(3, 4, 5, 6, 7, 8) // graph server 1 has not reported
	vs.note(1, &rpc.Keep{Seq: 1, Pinned: []uint64{5}, Newest: 8})
	held(4, 5, 7, 8)
	vs.note(1, &rpc.Keep{Seq: 1, Newest: 8}) // not newer than its last: ignored
	held(4, 5, 7, 8)
	vs.note(5, &rpc.Keep{Seq: 9, Newest: 8}) // no such graph server
	vs.note(0, nil)
	held(4, 5, 7, 8)
	vs.note(1, &rpc.Keep{Seq: 2, Newest: 8})
	held(4, 7, 8)
	if _, ok := vs.at(5); ok {
		t.Error("version 5 is held after it was dropped")
	}
	if got, ok := vs.at(7); !ok || len(got) != 1 {
		t.Errorf("version 7: %v, %v", got, ok)
	}

	vs.forget()
	vs.add(w())
	held(4, 7, 8, 9)
	vs.note(0, &rpc.Keep{Seq: 1, Newest: 9})
	held(4, 7, 8, 9)
	vs.note(1, &rpc.Keep{Seq: 1, Newest: 9})
	held(9)
	if len(vs.latest()) != 1 {
		t.Error("no weights for the newest version")
	}
}
