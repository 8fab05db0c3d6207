package graphserver

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestSenderIsItsCertificate serves graph server 2 of 3 over mutual TLS with its own
// certificate (pki.Issue with one identity per server) and calls it with others: graph server
// 1's certificate cannot say hello, push rows or report progress as graph server 0, nor send
// a Stop (the coordinator's), and is refused PermissionDenied before anything is posted, while
// graph server 1 speaking as itself and graph server 0 stopping are taken; the leaf a job's
// servers share (no identity) still speaks for any; another job's graph server 1 reaches
// nothing, not even a parameter server's Pull of weights: its handshake fails (Unavailable).
func TestSenderIsItsCertificate(t *testing.T) {
	ids := []pki.Identity{pki.GraphServer(0), pki.GraphServer(1), pki.GraphServer(2)}
	job, err := pki.Issue("ns/job", ids...)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.Issue("ns/other", ids...)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(b *pki.Bundle, id *pki.Identity) *pki.Credentials {
		t.Helper()
		if id != nil {
			if b, err = b.ForServer(*id); err != nil {
				t.Fatal(err)
			}
		}
		c, err := b.Credentials()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var posted atomic.Int32
	v := &service{cfg: &Config{Partition: 2, Partitions: 3, Intervals: 1, Epochs: 1, Run: "ns/job/uid"},
		lay: &layout{part: &partition.Part{SendTo: [][]int32{nil, nil, nil}}}, post: func(event) { posted.Add(1) }}
	srv, _ := rpc.NewServer(rpc.WithTLS(creds(job, &ids[2])))
	rpc.RegisterGraphServerServer(srv, v)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn := func(c *pki.Credentials) *grpc.ClientConn {
		cc, err := rpc.Dial(lis.Addr().String(), rpc.WithTLS(c))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hello := &rpc.HelloRequest{From: 0, Run: "ns/job/uid", Partitions: 3, Intervals: 1}
	rows := &rpc.RowsBatch{From: 0, Flow: rpc.Flow_FLOW_FORWARD, Task: &rpc.TaskRef{}, Data: &rpc.Tensor{}}
	gs1 := rpc.NewGraphServerClient(conn(creds(job, &ids[1])))
	for what, call := range map[string]func() error{
		"hello as graph server 0":    func() error { _, err := gs1.Hello(ctx, hello); return err },
		"rows as graph server 0":     func() error { _, err := gs1.PushRows(ctx, rows); return err },
		"progress as graph server 0": func() error { _, err := gs1.Progress(ctx, &rpc.ProgressReport{From: 0}); return err },
		"stop":                       func() error { _, err := gs1.Command(ctx, &rpc.CommandRequest{Stop: true}); return err },
	} {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("graph server 1's certificate: %s: %v, want PermissionDenied", what, err)
		}
	}
	if n := posted.Load(); n != 0 {
		t.Fatalf("%d events posted from graph server 1's impostures", n)
	}
	if _, err := gs1.Progress(ctx, &rpc.ProgressReport{From: 1}); err != nil {
		t.Errorf("graph server 1's progress as itself: %v", err)
	}
	gs0 := rpc.NewGraphServerClient(conn(creds(job, &ids[0])))
	if _, err := gs0.Command(ctx, &rpc.CommandRequest{Stop: true}); err != nil {
		t.Errorf("graph server 0's stop: %v", err)
	}
	shared := rpc.NewGraphServerClient(conn(creds(job, nil)))
	if _, err := shared.Progress(ctx, &rpc.ProgressReport{From: 0}); err != nil {
		t.Errorf("the shared leaf's progress as graph server 0: %v", err)
	}
	if n := posted.Load(); n != 3 {
		t.Errorf("%d events posted, want 3 (progress of 1, stop of 0, progress through the shared leaf)", n)
	}

	outsider := conn(creds(other, &ids[1]))
	if _, err := rpc.NewParamServerClient(outsider).Pull(ctx, &rpc.PullRequest{GraphServer: 1}); status.Code(err) != codes.Unavailable {
		t.Errorf("another job's graph server 1 pulls weights: %v, want Unavailable (no handshake)", err)
	}
	if _, err := rpc.NewGraphServerClient(outsider).Progress(ctx, &rpc.ProgressReport{From: 1}); status.Code(err) != codes.Unavailable {
		t.Errorf("another job's graph server 1 reports progress: %v, want Unavailable (no handshake)", err)
	}
	if n := posted.Load(); n != 3 {
		t.Errorf("%d events posted after another job's calls, want 3", n)
	}
}
