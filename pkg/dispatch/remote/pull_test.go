package remote

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestStoreInputs serves rows of a held task, leaves out a weight named by version, refuses
// rows the task does not have, and forgets the task once it is removed.
func TestStoreInputs(t *testing.T) {
	if _, err := NewStore("", pki.Identity{}); err == nil {
		t.Error("store without an address: no error")
	}
	st, err := NewStore("127.0.0.1:7000", pki.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	req := remotetest.Tasks(3, 20, 12, 4)[4] // ∇AV_1
	req.WeightVersion, req.WeightSource = 4, "127.0.0.1:7100"
	id := st.add(&req)
	ctx := context.Background()
	r, err := st.Inputs(ctx, &rpc.TaskInputsRequest{Task: id, Lo: 5, Hi: 9})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dispatch.DecodeRequest(r.Request)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.RowIDs, req.RowIDs[5:9]) {
		t.Errorf("rows [5, 9): row ids %v, want %v", got.RowIDs, req.RowIDs[5:9])
	}
	if got.W != nil || got.RowOffset != req.RowOffset+5 || got.Z.Rows != 4 || got.DP.Rows != 4 || got.Z.Data[0] != req.Z.Row(5)[0] || got.DP.Data[0] != req.DP.Row(5)[0] {
		t.Errorf("rows [5, 9): offset %d, W %v, Z %dx%d, dP %dx%d: want the task's rows 5..8 without W", got.RowOffset, got.W, got.Z.Rows, got.Z.Cols, got.DP.Rows, got.DP.Cols)
	}
	if _, err := st.Inputs(ctx, &rpc.TaskInputsRequest{Task: id, Lo: 5, Hi: 21}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("rows past the task's: %v, want InvalidArgument", err)
	}
	st.remove(id)
	if _, err := st.Inputs(ctx, &rpc.TaskInputsRequest{Task: id, Hi: 20}); status.Code(err) != codes.NotFound {
		t.Errorf("removed task: %v, want NotFound", err)
	}
}
