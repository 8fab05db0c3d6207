package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
)

// netnsPrefix starts the name of every network namespace the agent creates,
// so a restarted agent can remove what a killed one left behind.
const netnsPrefix = "dorylus-pod-"

// network is the bridge and the address pool of the node's pods.
type network struct {
	bridge  string
	prefix  netip.Prefix
	gateway netip.Addr

	mu   sync.Mutex
	used map[netip.Addr]bool
}

// newNetwork removes what an earlier agent left (its pods' namespaces and the
// bridge), then creates the bridge with the prefix's first address.
func newNetwork(bridge string, prefix netip.Prefix) (*network, error) {
	n := &network{bridge: bridge, prefix: prefix, gateway: prefix.Addr().Next(), used: map[netip.Addr]bool{}}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, netnsPrefix) {
				_ = ip("netns", "del", name)
			}
		}
	}
	_ = ip("link", "del", bridge)
	if err := ip("link", "add", bridge, "type", "bridge"); err != nil {
		return nil, err
	}
	if err := ip("addr", "add", fmt.Sprintf("%s/%d", n.gateway, prefix.Bits()), "dev", bridge); err != nil {
		return nil, err
	}
	if err := ip("link", "set", bridge, "up"); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *network) close() { _ = ip("link", "del", n.bridge) }

// sandbox is a pod's network namespace and address.
type sandbox struct {
	netns string
	veth  string
	addr  netip.Addr
}

// create makes the network namespace of the pod with UID uid: loopback, and
// eth0 with a free address, joined to the bridge. No default route: a pod
// reaches only the pod network (and the API server through the gateway).
func (n *network) create(uid string) (*sandbox, error) {
	short := strings.ReplaceAll(uid, "-", "")
	if len(short) > 11 {
		short = short[:11]
	}
	addr, err := n.allocate()
	if err != nil {
		return nil, err
	}
	s := &sandbox{netns: netnsPrefix + short, veth: "dv" + short, addr: addr}
	steps := [][]string{
		{"netns", "add", s.netns},
		{"link", "add", s.veth, "type", "veth", "peer", "name", "eth0", "netns", s.netns},
		{"link", "set", s.veth, "master", n.bridge, "up"},
		{"-n", s.netns, "addr", "add", fmt.Sprintf("%s/%d", addr, n.prefix.Bits()), "dev", "eth0"},
		{"-n", s.netns, "link", "set", "eth0", "up"},
		{"-n", s.netns, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			n.destroy(s)
			return nil, err
		}
	}
	return s, nil
}

// destroy removes the namespace (its eth0 and the veth peer go with it) and
// frees the address.
func (n *network) destroy(s *sandbox) {
	_ = ip("netns", "del", s.netns)
	_ = ip("link", "del", s.veth)
	n.mu.Lock()
	delete(n.used, s.addr)
	n.mu.Unlock()
}

func (n *network) allocate() (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for a := n.gateway.Next(); n.prefix.Contains(a) && a.Next().IsValid() && n.prefix.Contains(a.Next()); a = a.Next() {
		if !n.used[a] {
			n.used[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("pod network %s: no free address", n.prefix)
}

// ip runs the ip command.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// forward accepts TCP connections on listen and relays each to target, until
// ctx ends.
func forward(ctx context.Context, listen, target string) (io.Closer, error) {
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("API server forwarder: %w", err)
	}
	go func() {
		<-ctx.Done()
		lis.Close()
	}()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go relay(c, target)
		}
	}()
	return lis, nil
}

func relay(c net.Conn, target string) {
	defer c.Close()
	t, err := net.Dial("tcp", target)
	if err != nil {
		log.Printf("forward %s: %v", target, err)
		return
	}
	defer t.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(t, c)
	go cp(c, t)
	<-done
	<-done
}
