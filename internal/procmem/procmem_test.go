package procmem

import (
	"runtime"
	"testing"
)

// This process's peak covers its resident set and a buffer it has touched; an unknown
// process reads as zeros.
func TestRead(t *testing.T) {
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	m := Self()
	if m.Resident < int64(len(buf)) || m.Peak < m.Resident {
		t.Errorf("resident %d, peak %d bytes after touching %d", m.Resident, m.Peak, len(buf))
	}
	if got := Read(-1); got != (Memory{}) {
		t.Errorf("pid -1: %+v, want zeros", got)
	}
	runtime.KeepAlive(buf)
}
