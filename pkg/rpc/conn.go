package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// MaxMessage is the largest message a server or client accepts by default: an interval's rows
// can be large, and they travel as one batch. A larger message is refused with
// codes.ResourceExhausted before it is read into memory.
const MaxMessage = 1 << 30

// Option changes a setting of NewServer or Dial.
type Option func(*settings)

// settings are what Options change.
type settings struct {
	maxMessage int
	maxReceive int // of a server; 0: maxMessage
	tls        *pki.Credentials
	dialer     func(context.Context, string) (net.Conn, error)
}

// WithTLS makes every connection mutual TLS with the job's credentials (pki): a server
// requires a client certificate chaining to the job's CA (and lets the function certificate
// call FunctionMethods only), a client accepts only a server whose certificate does and names
// pki.ServerName. A nil c leaves the connections plaintext and
// unauthenticated, which only a run marked insecure (debugging) and tests ask for.
func WithTLS(c *pki.Credentials) Option {
	return func(s *settings) { s.tls = c }
}

// WithMaxMessage makes n bytes (at least 1) the largest message the server receives and sends,
// WithDialer makes Dial connect with d instead of the default dialer (a client that may dial
// only some addresses).
func WithDialer(d func(ctx context.Context, addr string) (net.Conn, error)) Option {
	return func(s *settings) { s.dialer = d }
}

// or the client sends and receives, instead of MaxMessage.
func WithMaxMessage(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.maxMessage = n
		}
	}
}

// WithMaxReceive makes n bytes (at least 1) the largest request a server receives, below the
// size of the replies it may send (MaxMessage or WithMaxMessage's): the largest message its
// peers legitimately send. Dial ignores it.
func WithMaxReceive(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.maxReceive = n
		}
	}
}

func apply(opts []Option) settings {
	s := settings{maxMessage: MaxMessage}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// Health-check timing: a peer that has answered once and then fails every check for
// DefaultDeadAfter (or the time given to Monitor) is reported dead.
const (
	CheckEvery       = 500 * time.Millisecond
	CheckTimeout     = 2 * time.Second
	DefaultDeadAfter = 3 * time.Second
)

// NewServer returns a gRPC server with the data plane's limits and keepalive policy (and
// WithTLS's credentials), serving health with status NOT_SERVING until the caller sets
// SERVING. It refuses requests larger than MaxMessage (or WithMaxMessage's or WithMaxReceive's
// size) with codes.ResourceExhausted before reading them, and fails replies larger than
// MaxMessage (or WithMaxMessage's size). Its messages go through Codec, the transport's
// frames through the package's pool of buffers.
func NewServer(opts ...Option) (*grpc.Server, *health.Server) {
	set := apply(opts)
	recv := set.maxMessage
	if set.maxReceive > 0 {
		recv = set.maxReceive
	}
	sopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(recv), grpc.MaxSendMsgSize(set.maxMessage),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 5 * time.Second, Timeout: 3 * time.Second}),
		grpc.ForceServerCodecV2(Codec), experimental.BufferPool(buffers),
		// The outermost interceptor: a RowsBatch's pooled rows go back once the call is over.
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			if b, ok := req.(*RowsBatch); ok {
				defer Recycle(b)
			}
			return next(ctx, req)
		}),
	}
	if set.tls != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(set.tls.ServerConfig())),
			grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
				if err := functionScope(ctx, info.FullMethod); err != nil {
					return nil, err
				}
				return next(ctx, req)
			}),
			grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
				if err := functionScope(ss.Context(), info.FullMethod); err != nil {
					return err
				}
				return next(srv, ss)
			}))
	}
	s := grpc.NewServer(sopts...)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(s, h)
	return s, h
}

// FunctionMethods are the only methods a client presenting the job's function certificate
// (pki.IsFunction) may call: the fetches of the pull data path.
var FunctionMethods = []string{TaskSource_Inputs_FullMethodName, ParamServer_Pull_FullMethodName}

// functionScope refuses a call to method from a function certificate, unless it is one of
// FunctionMethods, with codes.PermissionDenied.
func functionScope(ctx context.Context, method string) error {
	p, _ := peer.FromContext(ctx)
	var info credentials.TLSInfo
	if p != nil {
		info, _ = p.AuthInfo.(credentials.TLSInfo)
	}
	if len(info.State.VerifiedChains) == 0 {
		return status.Errorf(codes.Unauthenticated, "%s: no verified client certificate", method)
	}
	if pki.IsFunction(info.State.VerifiedChains[0][0]) && !slices.Contains(FunctionMethods, method) {
		return status.Errorf(codes.PermissionDenied, "%s: the function certificate may call only %v", method, FunctionMethods)
	}
	return nil
}

// ServeHealth serves only h's grpc.health.v1.Health, in plaintext, on lis until ctx ends (as
// Serve does, beside the server h belongs to): the readiness endpoint of a server whose
// data-plane port speaks TLS, for probes (the kubelet's gRPC probe) that cannot. Nothing else
// is reachable on it.
func ServeHealth(ctx context.Context, lis net.Listener, h *health.Server) error {
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h)
	return Serve(ctx, lis, s, h)
}

// redial is how a connection retries a peer that is not there yet: a server's peers start at
// about the same time, and gRPC's default (1 s, growing to 2 min) made a job wait seconds for
// peers that had come up long before.
var redial = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// Dial returns a client connection to addr with the data plane's limits and keepalive (and
// WithTLS's credentials; plain TCP without them). It does not wait for the peer.
// The address is resolved at every connection attempt (the passthrough resolver), not by
// gRPC's DNS resolver, which backs off for seconds after a name that does not resolve yet
// (a peer pod without an address) and re-resolves at most every 30 s (a restarted peer's new
// address). Calls fail with codes.ResourceExhausted, without sending or reading the message,
// when a request or reply is larger than MaxMessage (or WithMaxMessage's size). Messages go
// through Codec, the transport's frames through the package's pool of buffers, as a server's.
func Dial(addr string, opts ...Option) (*grpc.ClientConn, error) {
	set := apply(opts)
	creds := insecure.NewCredentials()
	if set.tls != nil {
		creds = credentials.NewTLS(set.tls.ClientConfig())
	}
	dopts := []grpc.DialOption{
		grpc.WithConnectParams(redial),
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(set.maxMessage), grpc.MaxCallSendMsgSize(set.maxMessage), grpc.ForceCodecV2(Codec)),
		experimental.WithBufferPool(buffers),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}),
	}
	if set.dialer != nil {
		dopts = append(dopts, grpc.WithContextDialer(set.dialer))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, dopts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// WaitServing polls the peer's health until it reports SERVING, ctx ends, or startup passes
// (0: no limit); name (e.g. "graph server 1 at host:port") is used in the error.
func WaitServing(ctx context.Context, conn *grpc.ClientConn, name string, startup time.Duration) error {
	var cancel context.CancelFunc
	if startup > 0 {
		ctx, cancel = context.WithTimeout(ctx, startup)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	hc := healthpb.NewHealthClient(conn)
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, CheckTimeout)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		ccancel()
		switch {
		case err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING:
			return nil
		case err == nil:
			last = fmt.Errorf("status %v", resp.Status)
		default:
			last = err
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("%s not ready after %v: %v", name, startup, last)
			}
			return ctx.Err()
		case <-time.After(CheckEvery):
		}
	}
}

// ErrStoppedServing is wrapped by Monitor's error for a peer that says it stopped serving.
var ErrStoppedServing = errors.New("stopped serving")

// Monitor checks the peer's health every CheckEvery until ctx ends (returning nil) or the peer
// has failed every check for deadAfter (DefaultDeadAfter if 0) or reports that it stopped
// serving (returning an error naming it). Call it after WaitServing. A machine so loaded that a
// live peer misses its checks for seconds needs a longer deadAfter.
func Monitor(ctx context.Context, conn *grpc.ClientConn, name string, deadAfter time.Duration) error {
	if deadAfter <= 0 {
		deadAfter = DefaultDeadAfter
	}
	hc := healthpb.NewHealthClient(conn)
	lastOK := time.Now()
	tick := time.NewTicker(CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING:
			lastOK = time.Now()
		case err == nil:
			return fmt.Errorf("%s %w (health %v)", name, ErrStoppedServing, resp.Status)
		case time.Since(lastOK) >= deadAfter:
			return fmt.Errorf("%s unreachable for %v: %w", name, time.Since(lastOK).Round(100*time.Millisecond), err)
		}
	}
}

// Serve runs srv on lis, with health SERVING, until ctx ends; then it stops serving
// gracefully, cutting off calls still running after a second.
func Serve(ctx context.Context, lis net.Listener, srv *grpc.Server, h *health.Server) error {
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	h.Shutdown()
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		srv.Stop()
	}
	return nil
}
