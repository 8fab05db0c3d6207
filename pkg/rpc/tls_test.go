package rpc

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// TestTLS serves health over WithTLS and its plaintext ServeHealth endpoint: a client with the
// job's credentials is served; one with another job's, or in plaintext, fails Unavailable;
// one with a function's certificate (the HTTP function's, or one the job's function issuer
// certified) is refused health (unary and stream) as
// PermissionDenied; the plaintext endpoint answers health.
func TestTLS(t *testing.T) {
	bundle := func() *pki.Bundle {
		b, err := pki.Issue("job")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	creds := func(b *pki.Bundle) *pki.Credentials {
		c, err := b.Credentials()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	jobBundle := bundle()
	job, other := creds(jobBundle), creds(bundle())
	fn := functionCredentials(t, jobBundle)
	listen := func() net.Listener {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return lis
	}
	lis, plain := listen(), listen()
	srv, h := NewServer(WithTLS(job))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 2)
	go func() { served <- Serve(ctx, lis, srv, h) }()
	go func() { served <- ServeHealth(ctx, plain, h) }()
	defer func() {
		cancel()
		for range 2 {
			if err := <-served; err != nil {
				t.Error(err)
			}
		}
	}()
	check := func(addr string, opts ...Option) error {
		conn, err := Dial(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s: health %v", addr, resp.Status)
		}
		return err
	}
	if err := check(lis.Addr().String(), WithTLS(job)); err != nil {
		t.Errorf("the job's own credentials: %v", err)
	}
	if err := check(plain.Addr().String()); err != nil {
		t.Errorf("plaintext health endpoint: %v", err)
	}
	if err := check(lis.Addr().String(), WithTLS(fn)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a certified function key: %v, want PermissionDenied", err)
	}
	httpFn, err := (&pki.Bundle{CA: jobBundle.CA, Cert: jobBundle.FunctionCert, Key: jobBundle.FunctionKey}).Credentials()
	if err != nil {
		t.Fatal(err)
	}
	if err := check(lis.Addr().String(), WithTLS(httpFn)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the HTTP function's certificate: %v, want PermissionDenied", err)
	}
	conn, err := Dial(lis.Addr().String(), WithTLS(fn))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = watch.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("the function identity watching health: %v, want PermissionDenied", err)
	}
	for name, opts := range map[string][]Option{"another job's credentials": {WithTLS(other)}, "plaintext": nil} {
		if err := check(lis.Addr().String(), opts...); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want Unavailable", name, err)
		}
	}
}

// functionCredentials returns the credentials of a function whose key the function issuer of
// b certified.
func functionCredentials(t *testing.T, b *pki.Bundle) *pki.Credentials {
	t.Helper()
	is, err := b.Issuer()
	if err != nil {
		t.Fatal(err)
	}
	k, pub, err := pki.NewFunctionKey()
	if err != nil {
		t.Fatal(err)
	}
	chain, err := is.Certify(pub)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ChainCredentials(is.CA(), chain, k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
