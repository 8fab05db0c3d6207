// Command netprobe is the e2e test's eye inside a pod: it serves HTTP, and
// GET /dial?addr=HOST:PORT opens a TCP connection to addr from the pod's
// network namespace and answers "open", "refused" or "timeout" (or
// "error: …"), so that the test sees what a NetworkPolicy lets that pod reach.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "HTTP address to serve on")
	timeout := flag.Duration("timeout", 3*time.Second, "how long a dial may take")
	flag.Parse()
	http.HandleFunc("/dial", func(w http.ResponseWriter, r *http.Request) {
		addr := r.URL.Query().Get("addr")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			http.Error(w, fmt.Sprintf("addr %q: %v", addr, err), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, dial(addr, *timeout))
	})
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(os.Stderr, "netprobe: serving on %s\n", *listen)
	log.Fatal(srv.ListenAndServe())
}

// dial names the outcome of a TCP connection to addr.
func dial(addr string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, timeout)
	var ne net.Error
	switch {
	case err == nil:
		_ = c.Close()
		return "open"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "error: " + err.Error()
	}
}
