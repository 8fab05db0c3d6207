package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

func TestTensorRoundTrip(t *testing.T) {
	d := &tensor.Dense{Rows: 2, Cols: 3, Data: []float32{1, -2.5, 3e-8, 4, 0, -0}}
	msg := NewTensor(d)
	if len(msg.Data) != 24 || msg.Data[4] != 0x00 || msg.Data[7] != 0xc0 { // -2.5 = 0xc0200000
		t.Fatalf("not little-endian float32: % x", msg.Data)
	}
	out := tensor.NewDense(2, 3)
	if err := msg.DecodeInto(out); err != nil {
		t.Fatal(err)
	}
	for i := range d.Data {
		if out.Data[i] != d.Data[i] {
			t.Fatalf("value %d: %v, want %v", i, out.Data[i], d.Data[i])
		}
	}
	if err := msg.DecodeInto(tensor.NewDense(3, 2)); err == nil {
		t.Error("a 2×3 tensor decoded into a 3×2 block")
	}
	msg.Data = msg.Data[:20]
	if err := msg.Shape(2, 3); err == nil {
		t.Error("a short payload passed the shape check")
	}
	rows := []int32{0, 7, 1 << 20}
	back := make([]int32, 3)
	if err := DecodeInt32s(back, Int32Bytes(rows)); err != nil || back[2] != 1<<20 {
		t.Fatalf("int32 round trip: %v %v", back, err)
	}
}

// TestTensorView: View reads a message's data as the tensor it describes — a view sharing the
// bytes where they are aligned, a copy where they are not — and refuses a wrong shape.
func TestTensorView(t *testing.T) {
	want := []float32{1, -2.5, 3e-8, 4, 0, 7}
	msg := NewTensor(&tensor.Dense{Rows: 2, Cols: 3, Data: slices.Clone(want)})
	v, err := msg.View(2, 3)
	if err != nil || v.Rows != 2 || v.Cols != 3 || !slices.Equal(v.Data, want) {
		t.Fatalf("View: %v, %+v; want 2×3 %v", err, v, want)
	}
	if littleEndian {
		msg.Data[2], msg.Data[3] = 0x00, 0x40 // 1 (bytes 00 00 80 3f) becomes 2 (00 00 00 40)
		if v.Data[0] != 2 {
			t.Errorf("a view of aligned data does not share it: %v", v.Data[0])
		}
	}
	odd := make([]byte, 1+len(msg.Data)) // data at an odd address
	copy(odd[1:], Float32Bytes(want))
	v, err = (&Tensor{Rows: 2, Cols: 3, Data: odd[1:]}).View(2, 3)
	if err != nil || !slices.Equal(v.Data, want) {
		t.Errorf("View of unaligned data: %v, %v; want %v", err, v, want)
	}
	for _, shape := range [][2]int{{3, 2}, {2, 2}, {1, 6}} {
		if _, err := msg.View(shape[0], shape[1]); !errors.Is(err, ErrPayload) {
			t.Errorf("View(%d, %d) of a 2×3 tensor: %v, want ErrPayload", shape[0], shape[1], err)
		}
	}
}

// TestMonitorReportsDeadPeer starts a server, waits for it, stops it, and expects Monitor to
// name it within a few seconds: no sooner than its dead-after time (the default, then a
// shorter one given) and not much later.
func TestMonitorReportsDeadPeer(t *testing.T) {
	for _, deadAfter := range []time.Duration{0, 1500 * time.Millisecond} {
		t.Run(fmt.Sprint(deadAfter), func(t *testing.T) { monitorDeadPeer(t, deadAfter) })
	}
}

func monitorDeadPeer(t *testing.T, deadAfter time.Duration) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, h := NewServer()
	go func() { _ = srv.Serve(lis) }() // ends when the test stops the server
	conn, err := Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	go func() {
		time.Sleep(300 * time.Millisecond)
		h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	}()
	if err := WaitServing(ctx, conn, "peer", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Monitor(ctx, conn, "graph server 9", deadAfter) }()
	time.Sleep(time.Second)
	stopped := time.Now()
	srv.Stop()
	want := deadAfter
	if want == 0 {
		want = DefaultDeadAfter
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "graph server 9") {
			t.Fatalf("monitor returned %v", err)
		}
		if took := time.Since(stopped); took > want+2*time.Second || took < want-CheckEvery {
			t.Errorf("dead peer reported after %v, want about %v", took, want)
		}
	case <-time.After(want + 5*time.Second):
		t.Fatal("dead peer not reported")
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := WaitServing(cctx, conn, "graph server 9", 10*time.Second); err == nil {
		t.Error("a stopped server is ready")
	}
}
