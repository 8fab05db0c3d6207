package function

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// EnvPullNetworks is the default of `dorylus function --pull-networks`: a Lambda function is
// configured by its environment.
const EnvPullNetworks = "DORYLUS_PULL_NETWORKS"

// ParseNetworks parses a comma-separated list of CIDR prefixes (empty: none).
func ParseNetworks(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("network %q: want a CIDR prefix such as 10.0.0.0/8: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// AllowPullNetworks makes the pull data path dial only addresses in nets; without it (or with
// none) it dials any address but loopback, link-local, unspecified and multicast ones (the
// function's own runtime API, a cloud's metadata service), so that a descriptor cannot make it
// probe its host.
func (h *Handler) AllowPullNetworks(nets []netip.Prefix) {
	h.pull.mu.Lock()
	defer h.pull.mu.Unlock()
	h.pull.networks = nets
}

// dialable reports whether a function allowed nets may dial ip.
func dialable(nets []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap()
	if len(nets) == 0 {
		return ip.IsValid() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsUnspecified() && !ip.IsMulticast() &&
			!ip.IsLinkLocalMulticast() && !ip.IsInterfaceLocalMulticast()
	}
	for _, p := range nets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// refuseAddr returns why addr may not be dialed by a function allowed nets, or nil; a host name
// is checked once resolved, as it is dialed (dialer).
func refuseAddr(nets []netip.Prefix, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v", addr, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !dialable(nets, ip) {
		return outside(nets, ip)
	}
	return nil
}

func outside(nets []netip.Prefix, ip netip.Addr) error {
	if len(nets) == 0 {
		return fmt.Errorf("%s is a loopback, link-local, unspecified or multicast address, which this function does not dial (--pull-networks allows networks)", ip)
	}
	return fmt.Errorf("%s is outside the networks this function dials (--pull-networks %v)", ip, nets)
}

// dialer returns a dialer that connects only to addresses nets allows, checked on the address
// it connects to, after name resolution.
func dialer(nets []netip.Prefix) func(context.Context, string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if !dialable(nets, ap.Addr()) {
			return outside(nets, ap.Addr())
		}
		return nil
	}}
	return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}
