package graphserver

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestMessageLimit serves a graph server's gRPC server as Run builds it and pushes the
// largest batch a peer sends (a gradient row with its id for every owned row of the widest
// layer), which is taken, and a request one byte over the server's limit, which is refused
// with ResourceExhausted before the handler runs; the server then still takes a valid Hello.
func TestMessageLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := startFuzzRun(ctx, t, fuzzConfigs(t)[1])
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, h := r.s.grpcServer()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = rpc.Serve(sctx, lis, srv, h); close(done) }() // stopped below
	defer func() {
		stop()
		<-done
		if err := r.stop(); err != nil {
			t.Errorf("the loop failed: %v", err)
		}
	}()
	conn, err := rpc.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rpc.NewGraphServerClient(conn)

	lay, limit := r.s.lay, r.s.lay.maxRequest()
	if limit >= rpc.MaxMessage {
		t.Fatalf("limit %d: want the run's largest request, below rpc.MaxMessage", limit)
	}
	l := slices.Index(lay.widths, slices.Max(lay.widths))
	n, d := lay.part.Owned, lay.widths[l]
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	// Pushing gradients a peer's largest batch is a gradient row with its id for every owned row
	// (a GAT); pulling them (a GCN), the rows of its whole ghost block here.
	largest := &rpc.RowsBatch{From: 0, Flow: rpc.Flow_FLOW_GRADIENT, Rows: rpc.Int32Bytes(ids),
		Task: &rpc.TaskRef{Partition: 0, Layer: uint32(l), Kind: uint32(pipeline.KindBackSC)},
		Data: &rpc.Tensor{Rows: uint32(n), Cols: uint32(d), Data: make([]byte, 4*n*d)}}
	if lay.pulls() {
		n = lay.part.GhostsOf(0)
		largest = &rpc.RowsBatch{From: 0, Flow: rpc.Flow_FLOW_GRADIENT,
			Task: &rpc.TaskRef{Partition: 0, Layer: uint32(l + 1), Kind: uint32(pipeline.KindBackAV)},
			Data: &rpc.Tensor{Rows: uint32(n), Cols: uint32(d), Data: make([]byte, 4*n*d)}}
		if l+1 >= lay.layers() {
			largest.Task.Kind = uint32(pipeline.KindAV)
		}
	}
	if size := proto.Size(largest); size > limit {
		t.Fatalf("the largest batch has %d bytes, over the limit of %d", size, limit)
	}
	if _, err := client.PushRows(ctx, largest); err != nil {
		t.Fatalf("the largest batch (%d×%d gradient rows): %v", n, d, err)
	}
	over := &rpc.RowsBatch{From: 0, Data: &rpc.Tensor{Data: make([]byte, limit-7)}} // 8 bytes of tags and lengths
	if size := proto.Size(over); size != limit+1 {
		t.Fatalf("oversize request of %d bytes, want %d", size, limit+1)
	}
	if _, err := client.PushRows(ctx, over); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a request over the limit of %d bytes: %v, want ResourceExhausted", limit, err)
	}
	hello := &rpc.HelloRequest{From: 0, Partitions: 2, Intervals: 2, Ghosts: uint64(len(lay.part.SendTo[0])), Run: "fuzz"}
	if _, err := client.Hello(ctx, hello); err != nil {
		t.Fatalf("a valid hello after the refused request: %v", err)
	}
}
