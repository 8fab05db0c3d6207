package minio

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// FaultProxy sits between a client and a real server on loopback and injects faults into
// object GETs (not listings). Set the fault counts before the client starts.
type FaultProxy struct {
	*httptest.Server
	mu       sync.Mutex
	Fail     int   // answer this many more GETs with 500
	Cuts     int   // cut this many more GET bodies after CutAfter bytes
	CutAfter int64 // bytes of a body sent before a cut
	Stalls   int   // stall this many more GETs after the headers
	ranges   []string
	gets     int
}

// NewFaultProxy starts a proxy to the server at target (a URL), closed when t ends.
func NewFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{}
	rp := httputil.NewSingleHostReverseProxy(u) // keeps the Host header the client signed
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Query().Has("list-type") || strings.Count(strings.Trim(r.URL.Path, "/"), "/") < 1 {
			rp.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		p.gets++
		p.ranges = append(p.ranges, r.Header.Get("Range"))
		fail, cut, stall := p.Fail > 0, p.Cuts > 0, p.Stalls > 0
		switch {
		case fail:
			p.Fail--
		case stall:
			p.Stalls--
		case cut:
			p.Cuts--
		}
		p.mu.Unlock()
		switch {
		case fail:
			http.Error(w, "injected fault", http.StatusInternalServerError)
		case stall:
			w.Header().Set("Content-Length", "1000000")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case cut:
			rp.ServeHTTP(&CutWriter{ResponseWriter: w, Left: p.CutAfter}, r)
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// Seen returns the number of object GETs and the Range header of each.
func (p *FaultProxy) Seen() (gets int, ranges []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gets, slices.Clone(p.ranges)
}

// CutWriter passes Left bytes of a body, then aborts the connection (an http.Handler's
// response writer).
type CutWriter struct {
	http.ResponseWriter
	Left int64
}

// Write implements io.Writer.
func (c *CutWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > c.Left {
		_, _ = c.ResponseWriter.Write(b[:c.Left]) // the cut is the point: the client sees a short body
		c.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	c.Left -= int64(len(b))
	return c.ResponseWriter.Write(b)
}
