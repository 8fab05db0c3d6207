package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/internal/loopback"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestServersRefuseOutsiders trains Cora on two graph-server and a parameter-server process
// over mutual TLS, then calls graph server 0 and the parameter server (they keep serving) as
// clients with the job's certificate, with none, with one of another job's CA and in
// plaintext: only the first is served; the others' calls fail with codes.Unavailable, and a
// bare TLS connection of each outsider reads the alert the server refused it with. The
// plaintext --health-address of each answers health and nothing else.
func TestServersRefuseOutsiders(t *testing.T) {
	health := loopback.FreeAddrs(t, 2)
	var creds string
	addrs, _ := coraServers(t, func(c *jobconfig.RunConfig) {
		c.Training.Epochs, c.Training.EvalEvery = 2, 2
		creds = c.Security.TLSDir
	}, [3][]string{{"--health-address", health[0]}, nil, {"--health-address", health[1]}})

	job, err := pki.Load(creds)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(creds, pki.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	jobCA := x509.NewCertPool()
	jobCA.AppendCertsFromPEM(caPEM)
	other, err := pki.Issue("another job")
	if err != nil {
		t.Fatal(err)
	}
	otherCert, err := tls.X509KeyPair(other.Cert, other.Key)
	if err != nil {
		t.Fatal(err)
	}
	// Outsiders that trust the job's CA, so that only the server can refuse them.
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: jobCA, ServerName: pki.ServerName}
	otherCA := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: jobCA, ServerName: pki.ServerName,
		// sent although the server asks for certificates of the job's CA only
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &otherCert, nil }}
	// alert connects with c and returns what the first read says: the server's TLS alert.
	alert := func(addr string, c *tls.Config) string {
		conn, err := tls.Dial("tcp", addr, c)
		if err != nil {
			return err.Error()
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		return fmt.Sprint(err)
	}
	dial := func(addr string, c *tls.Config) *grpc.ClientConn {
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(c)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	plain := func(addr string) *grpc.ClientConn {
		conn, err := rpc.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	// One call of each server's own service.
	calls := []struct {
		name string
		addr string
		call func(context.Context, *grpc.ClientConn) error
	}{
		{"graph server", addrs[0], func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := rpc.NewGraphServerClient(c).Hello(ctx, &rpc.HelloRequest{Partitions: 1, Run: "outsider"})
			return err
		}},
		{"parameter server", addrs[2], func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := rpc.NewParamServerClient(c).Pull(ctx, &rpc.PullRequest{Version: 1})
			return err
		}},
	}
	for i, s := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		own, err := rpc.Dial(s.addr, rpc.WithTLS(job))
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := healthpb.NewHealthClient(own).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s: health with the job's own certificate: %v, %v", s.name, resp, err)
		}
		if err := s.call(ctx, own); status.Code(err) == codes.Unavailable {
			t.Errorf("%s: the job's own certificate: %v", s.name, err)
		}
		own.Close()
		for _, o := range []struct {
			name string
			conn *grpc.ClientConn
		}{
			{"no certificate", dial(s.addr, noCert)},
			{"another CA's certificate", dial(s.addr, otherCA)},
			{"plaintext", plain(s.addr)},
		} {
			if err := s.call(ctx, o.conn); status.Code(err) != codes.Unavailable {
				t.Errorf("%s, %s: %v, want Unavailable", s.name, o.name, err)
			}
		}
		for _, o := range []struct {
			name string
			tls  *tls.Config
			want string
		}{
			{"no certificate", noCert, "remote error: tls: certificate required"},
			{"another CA's certificate", otherCA, "remote error: tls: unknown certificate authority"},
		} {
			if got := alert(s.addr, o.tls); got != o.want {
				t.Errorf("%s, %s: TLS says %q, want %q", s.name, o.name, got, o.want)
			}
		}
		// The plaintext health endpoint: SERVING, and no other service.
		hc := plain(health[i])
		if resp, err := healthpb.NewHealthClient(hc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s health endpoint: %v, %v", s.name, resp, err)
		}
		if err := s.call(ctx, hc); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s's own service on its health endpoint: %v, want Unimplemented", s.name, err)
		}
		cancel()
	}
}

// TestFunctionNeedsItsCredentials: `dorylus function` refuses to serve HTTP without a token
// unless told --insecure, and names a bad --token-file, a --credentials-dir without the
// function's files and a bad --pull-networks.
func TestFunctionNeedsItsCredentials(t *testing.T) {
	t.Setenv(jobconfig.EnvTokenFile, "")
	empty := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--token-file (or $DORYLUS_TOKEN_FILE) is required to serve HTTP; --insecure serves without authentication"},
		{[]string{"--token-file", empty}, "--token-file: load token: " + empty + " is empty"},
		{[]string{"--token-file", empty, "--credentials-dir", filepath.Dir(empty)}, "--credentials-dir: load TLS credentials: stat " + filepath.Join(filepath.Dir(empty), "ca.crt")},
		{[]string{"--pull-networks", "10.0.0.0/8,10.1/16"}, `--pull-networks: network "10.1/16": want a CIDR prefix`},
	} {
		_, _, err := run(t, append([]string{"function", "--listen", "127.0.0.1:0"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("function %q: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestCommandArgs: an executable named bootstrap started without arguments, as the Lambda
// provided runtimes start a zip's, runs `dorylus function`; any other command line is its own.
func TestCommandArgs(t *testing.T) {
	for _, c := range []struct{ argv, want []string }{
		{[]string{"/var/task/bootstrap"}, []string{"function"}},
		{[]string{"bootstrap", "train"}, []string{"train"}},
		{[]string{"/dorylus"}, []string{}},
	} {
		if got := commandArgs(c.argv); !slices.Equal(got, c.want) {
			t.Errorf("commandArgs(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}

// TestTrainOnGivenCredentials issues credentials with `dorylus credentials`, starts an HTTPS
// function on them before the run, and trains Cora through it with `dorylus train
// --credentials-dir`: the graph servers verify the function against the folder's CA, and the
// function counts the run's calls. A folder that holds credentials is not issued into again,
// and --credentials-dir refuses a folder without them and --insecure.
func TestTrainOnGivenCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, logs, err := run(t, "credentials", dir); err != nil {
		t.Fatalf("credentials: %v\n%s", err, logs)
	}
	if _, _, err := run(t, "credentials", dir); err == nil || !strings.Contains(err.Error(), "already holds credentials") {
		t.Errorf("credentials into a folder that holds them: %v", err)
	}
	token := filepath.Join(dir, pki.TokenFile)
	url, _ := remotetest.HTTPFunctionOf(t, dorylusBin, dir, "--token-file", token)
	rep := runCLI(t, "train", "--graph-servers", "2", "--epochs", "3", "--intervals", "2", "--output", "json", "--eval-every", "3",
		"--backend", "knative", "--knative-urls", url, "--knative-token-file", token, "--credentials-dir", dir, "--placement", "remote")
	if rep.Epochs != 3 || rep.TestAccuracy <= 0 {
		t.Errorf("report: %d epochs, test accuracy %g", rep.Epochs, rep.TestAccuracy)
	}
	creds, err := pki.LoadFunction(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := pki.LoadToken(token)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"metrics", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: creds.FunctionClientConfig()}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`(?m)^dorylus_function_calls_total (\d+)$`).FindSubmatch(metrics); m == nil || string(m[1]) == "0" {
		t.Errorf("the function served no call of the run: %q", m)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--credentials-dir", t.TempDir()}, "--credentials-dir: load TLS credentials"},
		{[]string{"--credentials-dir", dir, "--insecure"}, "--credentials-dir with --insecure"},
	} {
		_, _, err := run(t, append([]string{"train", "--graph-servers", "2"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("train %q: %v, want %q", c.args, err, c.want)
		}
	}
}
