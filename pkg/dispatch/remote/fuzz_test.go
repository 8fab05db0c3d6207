package remote

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/internal/hostile"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// FuzzStoreInputs asks a store served over gRPC on loopback, holding a task of every op, for
// hostile task ids and row ranges: each answer holds exactly the rows asked for of that task,
// or is InvalidArgument (rows it does not have) or NotFound (no such task in flight); memory
// follows the held task's size; the server answers its health check after each.
func FuzzStoreInputs(f *testing.F) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	st, err := NewStore(lis.Addr().String(), nil)
	if err != nil {
		f.Fatal(err)
	}
	held := append(remotetest.Tasks(1, 6, 5, 3), remotetest.GATTasks(2, 4, 5, 2)...)
	for i := range held {
		if i%2 == 0 && !held[i].Op.IsGAT() && held[i].W != nil {
			held[i].WeightVersion, held[i].WeightSource = 3, "127.0.0.1:1" // left out of the answer
		}
		st.add(&held[i])
	}
	srv, h := rpc.NewServer()
	rpc.RegisterTaskSourceServer(srv, st)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rpc.Serve(ctx, lis, srv, h); close(done) }() // stopped by the cleanup
	conn, err := rpc.Dial(lis.Addr().String())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close(); cancel(); <-done })
	client, health := rpc.NewTaskSourceClient(conn), healthpb.NewHealthClient(conn)

	for id := range uint64(len(held)) + 2 {
		f.Add(id, uint32(1), uint32(3))
		f.Add(id, uint32(0), uint32(held[min(id, uint64(len(held)-1))].NumRows()))
	}
	f.Add(uint64(1), uint32(1<<31), uint32(1<<32-1))
	f.Add(^uint64(0), uint32(0), uint32(0))
	budget := hostile.Budget{Fixed: 1 << 20}
	f.Fuzz(func(t *testing.T, id uint64, lo, hi uint32) {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		var r *rpc.TaskInputsReply
		var err error
		budget.Check(t, 16, "Inputs", func() { r, err = client.Inputs(cctx, &rpc.TaskInputsRequest{Task: id, Lo: lo, Hi: hi}) })
		known := id >= 1 && id <= uint64(len(held))
		switch code := status.Code(err); {
		case code == codes.NotFound && !known:
		case code == codes.InvalidArgument && known:
		case err == nil && known:
			want := held[id-1]
			got, err := dispatch.DecodeRequest(r.Request)
			if err != nil {
				t.Fatalf("task %d rows [%d, %d): %v", id, lo, hi, err)
			}
			sliced := rowRange(&want, int(lo), int(hi))
			d := dispatch.Descriptor{Task: id, Lo: int(lo), Hi: int(hi)}
			if err := dispatch.CheckInputs(&got, &sliced, d); err != nil {
				t.Fatalf("rows [%d, %d) of task %d: %v", lo, hi, id, err)
			}
			if want.WeightSource != "" && got.W != nil {
				t.Fatalf("task %d: the weight named by version was sent", id)
			}
		default:
			t.Fatalf("task %d (held: %v) rows [%d, %d): %v", id, known, lo, hi, err)
		}
		if resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health after the call: %v %v", resp, err)
		}
	})
}
