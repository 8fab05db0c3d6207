package paramserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestPreemptWaitsForTheGraphServers: Preempt tells both connected graph servers, on their
// Watch streams, that the run is preempted, and returns only once neither stream is open
// (both graph servers drained and exited); with a context that ends first it returns an error
// naming how many are still connected.
func TestPreemptWaitsForTheGraphServers(t *testing.T) {
	s := mustShard(t, 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := serveShard(t, ctx, s)
	mustInitAll(t, s, initReq(0, false), initReq(1, false))
	var ends []context.CancelFunc
	var streams []rpc.ParamServer_WatchClient
	for gs := range uint32(2) {
		wctx, end := context.WithCancel(ctx)
		w, err := c.Watch(wctx, &rpc.WatchRequest{GraphServer: gs})
		if err != nil {
			t.Fatal(err)
		}
		if u, err := w.Recv(); err != nil || u.Preempt {
			t.Fatalf("graph server %d's first update %v, %v: want one without preempt", gs, u, err)
		}
		ends, streams = append(ends, end), append(streams, w)
	}

	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	if err := s.Preempt(short); err == nil || !strings.Contains(err.Error(), "2 graph servers still connected") {
		t.Fatalf("Preempt with both graph servers connected until its context ended: %v, want an error naming 2", err)
	}
	for gs, w := range streams {
		if u, err := w.Recv(); err != nil || !u.Preempt {
			t.Fatalf("graph server %d's update after Preempt %v, %v: want preempt", gs, u, err)
		}
	}

	done := make(chan error, 1)
	go func() { done <- s.Preempt(ctx) }()
	ends[0]()
	select {
	case err := <-done:
		t.Fatalf("Preempt returned (%v) while graph server 1 was still connected", err)
	case <-time.After(200 * time.Millisecond):
	}
	ends[1]()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Preempt once no graph server is connected: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Preempt did not return within 5 s of the last graph server leaving")
	}
}
