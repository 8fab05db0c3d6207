package rpc

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// echoSource answers TaskSource.Inputs with a reply of in.Hi bytes.
type echoSource struct {
	UnimplementedTaskSourceServer
	calls int
}

func (e *echoSource) Inputs(_ context.Context, in *TaskInputsRequest) (*TaskInputsReply, error) {
	e.calls++
	return &TaskInputsReply{Request: make([]byte, in.Hi)}, nil
}

// serveLimited serves an echoSource with the given server options on loopback and dials it
// with the given client options.
func serveLimited(t *testing.T, server, client []Option) (*grpc.ClientConn, *echoSource) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, h := NewServer(server...)
	src := &echoSource{}
	RegisterTaskSourceServer(srv, src)
	RegisterParamServerServer(srv, UnimplementedParamServerServer{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = Serve(ctx, lis, srv, h); close(done) }() // stopped by the cleanup
	conn, err := Dial(lis.Addr().String(), client...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); cancel(); <-done })
	return conn, src
}

// TestMessageLimits sends and receives messages just under and over the size limit of the
// server and of the client: an oversize one is refused with ResourceExhausted, and the
// server answers the next call.
func TestMessageLimits(t *testing.T) {
	const limit = 64 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("server refuses an oversize request", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, h := NewServer(WithMaxMessage(limit))
		RegisterParamServerServer(srv, UnimplementedParamServerServer{})
		sctx, scancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = Serve(sctx, lis, srv, h); close(done) }() // stopped with sctx
		defer func() { scancel(); <-done }()
		conn, err := Dial(lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ps := NewParamServerClient(conn)
		push := func(n int) error {
			_, err := ps.Push(ctx, &PushRequest{Grads: []*LayerTensor{{Tensor: &Tensor{Rows: 1, Cols: uint32(n / 4), Data: make([]byte, n)}}}})
			return err
		}
		err = push(limit + 1)
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
			t.Fatalf("push over the server's limit: %v, want ResourceExhausted", err)
		}
		// The server keeps serving: a request under the limit reaches the handler.
		if err := push(limit / 2); status.Code(err) != codes.Unimplemented {
			t.Fatalf("push under the limit after a refused one: %v, want the handler's Unimplemented", err)
		}
	})

	t.Run("server fails an oversize reply", func(t *testing.T) {
		conn, src := serveLimited(t, []Option{WithMaxMessage(limit)}, nil)
		c := NewTaskSourceClient(conn)
		if _, err := c.Inputs(ctx, &TaskInputsRequest{Hi: limit + 1}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("reply over the server's limit: %v, want ResourceExhausted", err)
		}
		r, err := c.Inputs(ctx, &TaskInputsRequest{Hi: limit / 2})
		if err != nil || len(r.Request) != limit/2 {
			t.Fatalf("reply under the limit after a failed one: %v", err)
		}
		if src.calls != 2 {
			t.Fatalf("handler ran %d times, want 2", src.calls)
		}
	})

	t.Run("server receives less than it sends", func(t *testing.T) {
		conn, src := serveLimited(t, []Option{WithMaxReceive(limit)}, nil)
		if r, err := NewTaskSourceClient(conn).Inputs(ctx, &TaskInputsRequest{Hi: 2 * limit}); err != nil || len(r.Request) != 2*limit {
			t.Fatalf("reply over the receive limit: %v", err)
		}
		_, err := NewParamServerClient(conn).Push(ctx, &PushRequest{Grads: []*LayerTensor{{Tensor: &Tensor{Data: make([]byte, limit+1)}}}})
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("request over the receive limit: %v, want ResourceExhausted", err)
		}
		if _, err := NewParamServerClient(conn).Push(ctx, &PushRequest{}); status.Code(err) != codes.Unimplemented || src.calls != 1 {
			t.Fatalf("small request after a refused one: %v (handler calls %d), want the handler's Unimplemented", err, src.calls)
		}
	})

	t.Run("client refuses an oversize reply and request", func(t *testing.T) {
		conn, src := serveLimited(t, nil, []Option{WithMaxMessage(limit)})
		c := NewTaskSourceClient(conn)
		if _, err := c.Inputs(ctx, &TaskInputsRequest{Hi: limit + 1}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("reply over the client's limit: %v, want ResourceExhausted", err)
		}
		if r, err := c.Inputs(ctx, &TaskInputsRequest{Hi: limit - 16}); err != nil || len(r.Request) != limit-16 {
			t.Fatalf("reply under the client's limit: %v", err)
		}
		calls := src.calls
		// A request over the client's own limit is refused before it is sent: the server
		// (whose limit is the default) would answer Unimplemented.
		_, err := NewParamServerClient(conn).Push(ctx, &PushRequest{Grads: []*LayerTensor{{Tensor: &Tensor{Data: make([]byte, limit+1)}}}})
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("request over the client's limit: %v, want ResourceExhausted", err)
		}
		if src.calls != calls {
			t.Fatal("the handler ran for a refused request")
		}
		if _, err := NewParamServerClient(conn).Push(ctx, &PushRequest{}); status.Code(err) != codes.Unimplemented {
			t.Fatalf("small request after a refused one: %v, want the handler's Unimplemented", err)
		}
	})
}

// TestDefaultLimit checks that the default limit is MaxMessage and that WithMaxMessage and
// WithMaxReceive ignore sizes below 1.
func TestDefaultLimit(t *testing.T) {
	if s := apply(nil); s.maxMessage != MaxMessage {
		t.Fatalf("default %d, want %d", s.maxMessage, MaxMessage)
	}
	if s := apply([]Option{WithMaxMessage(0), WithMaxMessage(-5)}); s.maxMessage != MaxMessage {
		t.Fatalf("non-positive sizes changed the limit to %d", s.maxMessage)
	}
	if s := apply([]Option{WithMaxMessage(7)}); s.maxMessage != 7 {
		t.Fatalf("WithMaxMessage(7) gave %d", s.maxMessage)
	}
	if s := apply([]Option{WithMaxReceive(9), WithMaxReceive(0)}); s.maxReceive != 9 || s.maxMessage != MaxMessage {
		t.Fatalf("WithMaxReceive(9) gave receive %d, message %d", s.maxReceive, s.maxMessage)
	}
}

// TestShapeOverflow: a declared shape whose byte size overflows is not taken for an empty one.
func TestShapeOverflow(t *testing.T) {
	for _, c := range []struct{ rows, cols, bytes int }{{1 << 31, 1 << 31, 0}, {1 << 62, 1, 0}, {0, 5, 4}, {3, 0, 4}, {2, 2, 15}} {
		m := &Tensor{Rows: uint32(c.rows), Cols: uint32(c.cols), Data: make([]byte, c.bytes)}
		if err := m.Shape(c.rows, c.cols); err == nil {
			t.Errorf("%d×%d with %d bytes passed the shape check", c.rows, c.cols, c.bytes)
		}
	}
	if err := (&Tensor{Rows: 0, Cols: 3}).Shape(0, 3); err != nil {
		t.Errorf("empty 0×3 tensor: %v", err)
	}
}
