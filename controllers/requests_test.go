package controllers

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// requestCounter counts the API requests sent through a rest.Config, by
// namespace, Kubernetes verb and resource.
type requestCounter struct {
	mu sync.Mutex
	n  map[requestKey]int64
}

// requestKey classifies one request; resource includes the subresource
// ("gnntrainingjobs/status").
type requestKey struct {
	namespace, verb, resource string
}

func (k requestKey) String() string { return k.verb + " " + k.resource }

// wrap is a rest.Config transport wrapper that counts every request.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{next: rt, c: c}
}

type countingTransport struct {
	next http.RoundTripper
	c    *requestCounter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	k := classify(req)
	t.c.mu.Lock()
	if t.c.n == nil {
		t.c.n = map[requestKey]int64{}
	}
	t.c.n[k]++
	t.c.mu.Unlock()
	return t.next.RoundTrip(req)
}

// classify reads the namespace, verb and resource of an API request from
// its method and path (/api/v1/... or /apis/<group>/<version>/...).
func classify(req *http.Request) requestKey {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return requestKey{verb: strings.ToLower(req.Method), resource: req.URL.Path}
	}
	var k requestKey
	if len(parts) >= 3 && parts[0] == "namespaces" {
		k.namespace, parts = parts[1], parts[2:]
	}
	named := len(parts) >= 2
	if len(parts) > 0 {
		k.resource = parts[0]
	}
	if len(parts) >= 3 {
		k.resource += "/" + parts[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			k.verb = "watch"
		case named:
			k.verb = "get"
		default:
			k.verb = "list"
		}
	case http.MethodPost:
		k.verb = "create"
	case http.MethodPut:
		k.verb = "update"
	case http.MethodPatch:
		k.verb = "patch"
		if req.Header.Get("Content-Type") == string(types.ApplyYAMLPatchType) || req.Header.Get("Content-Type") == string(types.ApplyCBORPatchType) {
			k.verb = "apply"
		}
	case http.MethodDelete:
		k.verb = "delete"
		if !named {
			k.verb = "deletecollection"
		}
	default:
		k.verb = strings.ToLower(req.Method)
	}
	return k
}

// snapshot copies the counts.
func (c *requestCounter) snapshot() map[requestKey]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[requestKey]int64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// requestDelta is what was counted between two snapshots, keyed by verb and
// resource over the namespaces that keep returns true for ("" is
// cluster-scoped).
func requestDelta(before, after map[requestKey]int64, keep func(namespace string) bool) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 && keep(k.namespace) {
			out[k.String()] += d
		}
	}
	return out
}

// total sums a delta.
func total(d map[string]int64) int64 {
	var n int64
	for _, v := range d {
		n += v
	}
	return n
}

// formatDelta lists a delta as "verb resource: n" lines, largest first.
func formatDelta(d map[string]int64) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return d[keys[i]] > d[keys[j]] || d[keys[i]] == d[keys[j]] && keys[i] < keys[j] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-40s %d", k, d[k])
	}
	return b.String()
}
