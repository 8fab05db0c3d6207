package function

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
)

// TestPullDialsOnlyAllowedNetworks hands the handler descriptors naming a listener on
// loopback: by default (no --pull-networks) an IP literal is refused as a bad request and a
// host name that resolves to loopback fails as it is dialed, and with networks that leave
// loopback out both are refused the same way; the listener accepts no connection. With
// loopback allowed it is dialed.
func TestPullDialsOnlyAllowedNetworks(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	req := remotetest.Tasks(1, 4, 6, 3)[0]
	call := func(nets []netip.Prefix, addr string) error {
		h, err := NewHandler(Faults{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		h.AllowPlaintextPull()
		h.AllowPullNetworks(nets)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = h.Handle(ctx, dispatch.EncodeDescriptor(&req, dispatch.Descriptor{Task: 1, Hi: req.NumRows(), Source: addr}))
		return err
	}
	private := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, c := range []struct {
		name string
		nets []netip.Prefix
		addr string
		want string
		typ  string
	}{
		{"loopback by default", nil, "127.0.0.1:" + port, "127.0.0.1 is a loopback", remote.ErrorTypeBadRequest},
		{"IPv6 loopback by default", nil, "[::1]:" + port, "::1 is a loopback", remote.ErrorTypeBadRequest},
		{"metadata service by default", nil, "169.254.169.254:80", "link-local", remote.ErrorTypeBadRequest},
		{"a name of loopback by default", nil, "localhost:" + port, "is a loopback", remote.ErrorTypeFailed},
		{"loopback outside the networks", private, "127.0.0.1:" + port, "outside the networks", remote.ErrorTypeBadRequest},
		{"a name of loopback outside the networks", private, "localhost:" + port, "outside the networks", remote.ErrorTypeFailed},
	} {
		err := call(c.nets, c.addr)
		var fe *Error
		if !errors.As(err, &fe) || fe.Type != c.typ || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a %s error saying %q", c.name, err, c.typ, c.want)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the listener accepted %d connections of refused descriptors", n)
	}
	_ = call([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "127.0.0.1:"+port) // fails: not a gRPC server
	if accepted.Load() == 0 {
		t.Error("an allowed address was not dialed")
	}
	if _, err := ParseNetworks("10.0.0.0/8, fd00::/8"); err != nil {
		t.Error(err)
	}
	if _, err := ParseNetworks("10.0.0.0/33"); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
		t.Errorf("a bad prefix: %v, want an error naming it", err)
	}
}
