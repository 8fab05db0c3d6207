package source_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/source"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"https://host/d.tar.gz", "https://host/d.tar.gz"},
		{"https://alice:s3cr%2Ft@host:8443/d.tar.gz", "https://alice:REDACTED@host:8443/d.tar.gz"},
		{"https://alice@host/d.tar.gz", "https://alice@host/d.tar.gz"},
		{"https://host/d.tar.gz?X-Amz-Signature=abc&X-Amz-Credential=AKIA%2F1#frag", "https://host/d.tar.gz?REDACTED#frag"},
		{"https://u:p@host/%zz?sig=abc", "https://u:REDACTED@host/%zz?REDACTED"}, // does not parse as a URL
		{"s3://bucket/prefix", "s3://bucket/prefix"},
		{"datasets/cora", "datasets/cora"},
		{"rmat:nodes=10,edges=20", "rmat:nodes=10,edges=20"},
	} {
		if got := source.Redact(tc.spec); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.spec, got, tc.want)
		}
	}
}

// TestFetchErrorsRedactSecrets: a dataset URL's password and presigned query never reach an
// error's message — neither the fetcher's own text nor the HTTP client's, which prints the URL
// it failed on — while the error still unwraps to its kind.
func TestFetchErrorsRedactSecrets(t *testing.T) {
	const password, signature = "hunter2pw", "f00dfacesignature"
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "denied", http.StatusForbidden)
	}))
	defer forbidden.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	secretURL := func(host, path string) string {
		return "http://alice:" + password + "@" + host + path + "?X-Amz-Signature=" + signature
	}
	for _, tc := range []struct {
		name, url string
		kind      error // nil: any error
	}{
		{"forbidden", secretURL(strings.TrimPrefix(forbidden.URL, "http://"), "/d.dorylus"), objstore.ErrAccessDenied},
		{"refused", secretURL(refused, "/d.dorylus"), nil},
		{"folder", secretURL(refused, "/parts/"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := source.Fetch(ctx, jobconfig.Dataset{Source: jobconfig.SourceHTTP, URL: tc.url},
				source.Options{Dir: t.TempDir(), Backoff: objstore.Backoff{Attempts: 1}})
			if err == nil {
				t.Fatal("Fetch succeeded")
			}
			if msg := err.Error(); strings.Contains(msg, password) || strings.Contains(msg, signature) {
				t.Fatalf("error prints a secret: %s", msg)
			}
			if !strings.Contains(err.Error(), "REDACTED") {
				t.Errorf("error does not name the URL it failed on: %v", err)
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("error %v does not unwrap to %v", err, tc.kind)
			}
		})
	}
}
