package launcher

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestReportsDecodeLines decodes graph server 0's lines as they are written, split anywhere,
// reports a line that is no event with its text and decodes the next, and closes C once the
// writer is done.
func TestReportsDecodeLines(t *testing.T) {
	rs := NewReports()
	defer rs.Close()
	go func() {
		text := `{"event":"epoch","epoch":1,"loss":1.5}` + "\n" + `not json` + "\n" + `{"event":"result","epoch":1,"test_accuracy":0.75}` + "\n"
		for len(text) > 0 { // in pieces, as a pipe may deliver them
			n := min(7, len(text))
			if _, err := rs.Write([]byte(text[:n])); err != nil {
				t.Error(err)
			}
			text = text[n:]
		}
		rs.CloseWrite()
	}()
	var got []string
	for r := range rs.C {
		switch {
		case r.Err != nil:
			if !strings.Contains(r.Err.Error(), `"not json"`) {
				t.Errorf("bad line: %v, want its text", r.Err)
			}
			got = append(got, "error")
		default:
			got = append(got, fmt.Sprintf("%s %d %g %g", r.Event.Event, r.Event.Epoch, r.Event.Loss, r.Event.TestAcc))
		}
	}
	if want := []string{"epoch 1 1.5 0", "error", "result 1 0 0.75"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reports %q, want %q", got, want)
	}
}

// TestReportsCloseUnblocksWriter: once the reader stops, a writer blocked on a line nobody
// takes fails instead of hanging (a graph server writing after the launcher stopped reading).
func TestReportsCloseUnblocksWriter(t *testing.T) {
	rs := NewReports()
	done := make(chan error, 1)
	go func() {
		_, err := rs.Write([]byte(`{"event":"epoch","epoch":1}` + "\n"))
		if err == nil {
			_, err = rs.Write([]byte(`{"event":"epoch","epoch":2}` + "\n"))
		}
		done <- err
	}()
	time.Sleep(10 * time.Millisecond) // the first line waits on C
	rs.Close()
	select {
	case err := <-done:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("write after Close: %v, want %v", err, io.ErrClosedPipe)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write still blocked 5 s after Close")
	}
	for range rs.C { // closes
	}
}
