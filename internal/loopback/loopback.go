// Package loopback hands tests loopback addresses for the servers they start.
package loopback

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address no one listens on now.
func FreeAddr(t testing.TB) string { return FreeAddrs(t, 1)[0] }

// FreeAddrs returns n different loopback addresses no one listens on now: each is held until
// all are picked, so that the system cannot hand out one twice.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out[i] = l.Addr().String()
	}
	return out
}
