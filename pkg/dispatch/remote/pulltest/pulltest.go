// Package pulltest serves the pull data path of the serverless tensor backends on loopback
// for their tests: a task source and a real parameter-server shard.
package pulltest

import (
	"context"
	"net"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/runtime/paramserver"
)

// Source serves the pull data path on loopback for reqs (GCN tasks of one model, as
// remotetest.Tasks returns them): a gRPC server with the returned Store (what a graph server serves) and
// a real parameter-server shard initialised for the model. It returns reqs with each weight
// replaced by the shard's version 0 of that layer and named by version (WeightSource), so
// that a function pulls it from the shard. The server speaks mutual TLS with creds (nil:
// plaintext); the Store certifies functions' keys with issuer (nil: a plaintext job).
func Source(t testing.TB, reqs []dispatch.TaskRequest, creds *pki.Credentials, issuer *pki.Issuer) (*remote.Store, []dispatch.TaskRequest) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	store, err := remote.NewStore(lis.Addr().String(), issuer)
	if err != nil {
		t.Fatal(err)
	}
	shard, err := paramserver.New(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	srv, h := rpc.NewServer(rpc.WithTLS(creds))
	rpc.RegisterTaskSourceServer(srv, store)
	rpc.RegisterParamServerServer(srv, shard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rpc.Serve(ctx, lis, srv, h); close(done) }() // stopped by the cleanup
	t.Cleanup(func() { cancel(); <-done })

	init := &rpc.InitRequest{Seed: 5, LearningRate: 0.01, Sync: true, Contributions: 1, GraphServers: 1, Run: "pull-test"}
	for _, d := range reqs[0].Model.Dims() {
		init.Dims = append(init.Dims, uint32(d))
	}
	if _, err := shard.Init(ctx, init); err != nil {
		t.Fatal(err)
	}
	w, err := shard.Pull(ctx, &rpc.PullRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]dispatch.TaskRequest, len(reqs))
	for i, r := range reqs {
		if r.W != nil && !r.Op.IsGAT() {
			r.W = tensor.NewDense(r.W.Rows, r.W.Cols)
			if err := w.Layers[r.Layer].Tensor.DecodeInto(r.W); err != nil {
				t.Fatal(err)
			}
			r.WeightVersion, r.WeightSource = 0, lis.Addr().String()
		}
		out[i] = r
	}
	return store, out
}
