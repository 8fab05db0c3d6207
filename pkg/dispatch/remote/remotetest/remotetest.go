// Package remotetest starts the real components the serverless backends are tested against:
// the dorylus binary built from this module, `dorylus function` as an HTTPS process (with job
// credentials issued once per test binary), and the
// AWS Lambda runtime interface emulator (aws-lambda-rie) running `dorylus function`, all on
// loopback. A test that needs a missing tool fails, naming the command that installs it.
package remotetest

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/internal/loopback"
	"github.com/dorylus-gnn/dorylus/internal/testenv"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// BuildDorylus builds ./runtime/dorylus of this module into dir and returns the binary.
func BuildDorylus(dir string) (string, error) {
	// the module's root: the test's own folder is inside it (a path from runtime.Caller is not
	// a path on disk under -trimpath, which make test builds with)
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("build dorylus: go env GOMOD: %w", err)
	}
	bin := filepath.Join(dir, "dorylus")
	cmd := exec.Command("go", "build", "-o", bin, "./runtime/dorylus")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build dorylus: %v\n%s", err, out)
	}
	return bin, nil
}

// MainWithDorylus is a TestMain body: it builds the dorylus binary into a temporary folder,
// stores its path in *bin, runs the tests and exits with their status.
func MainWithDorylus(m *testing.M, bin *string) {
	dir, err := os.MkdirTemp("", "dorylus-test-*")
	if err == nil {
		*bin, err = BuildDorylus(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Tool returns the path of an external binary: on $PATH, or in ~/.cache/dorylus/bin where
// `hack/tools.sh NAME` installs it. Without it the test fails, naming that command.
func Tool(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "dorylus", "bin", name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := fmt.Sprintf("%s is neither on PATH nor in ~/.cache/dorylus/bin: run hack/tools.sh %s", name, name)
	testenv.Missing(t, msg)
	return ""
}

// Process is a started process whose output is kept for failure messages.
type Process struct {
	Cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // what Wait returned, set before done closes
}

// Wait waits up to d for the process to exit and returns how it exited; ok is false if it
// is still running.
func (p *Process) Wait(d time.Duration) (err error, ok bool) {
	select {
	case <-p.done:
		return p.err, true
	case <-time.After(d):
		return nil, false
	}
}

// Output returns what the process wrote so far.
func (p *Process) Output() string { return p.out.String() }

// Kill kills the process group (the emulator and its runtime).
func (p *Process) Kill() { _ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL) } // gone already is fine

// start starts a command in its own process group, killed when the test ends.
func start(t testing.TB, env []string, name string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Process{Cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s %s output:\n%s", filepath.Base(name), strings.Join(args, " "), tail(p.Output(), 3000))
		}
	})
	return p
}

// waitHTTP waits until url answers any HTTP status through client.
func waitHTTP(t testing.TB, p *Process, client *http.Client, method, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(method, url, strings.NewReader(""))
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not answering after 30 s:\n%s", url, tail(p.Output(), 3000))
}

// PullLoopback is the flag of `dorylus function` that lets the pull data path fetch from the
// tests' task sources and parameter servers, on loopback, which it refuses by default.
const PullLoopback = "--pull-networks=127.0.0.0/8"

// Token is the bearer token HTTPFunction's functions require (knative.Options.Token).
const Token = "remotetest-token"

// TokenFile writes Token into a file of the test's and returns its path.
func TokenFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// bundle is the job credentials HTTPFunction's functions serve with, issued once per test
// binary.
var bundle = sync.OnceValues(func() (*pki.Bundle, error) { return pki.Issue("remotetest") })

// NewJob issues a new job's credentials and returns them, parsed, and their function issuer.
func NewJob(t testing.TB) (*pki.Bundle, *pki.Credentials, *pki.Issuer) {
	t.Helper()
	b, err := pki.Issue("ns/job")
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	is, err := b.Issuer()
	if err != nil {
		t.Fatal(err)
	}
	return b, c, is
}

// Bundle returns the job credentials of HTTPFunction's functions.
func Bundle(t testing.TB) *pki.Bundle {
	t.Helper()
	b, err := bundle()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// CredentialsDir writes Bundle into a folder of the test's, as a mounted credentials Secret
// holds it, and returns the folder.
func CredentialsDir(t testing.TB) string {
	t.Helper()
	return WriteCredentials(t, Bundle(t))
}

// WriteCredentials writes b into a new folder of the test's and returns the folder.
func WriteCredentials(t testing.TB, b *pki.Bundle) string {
	t.Helper()
	dir, err := os.MkdirTemp(t.TempDir(), "credentials-")
	if err == nil {
		err = b.WriteDir(dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// ClientTLS returns the TLS configuration of a caller of HTTPFunction's functions: Bundle's
// CA and pki.FunctionServerName (knative.Options.TLS).
func ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	c, err := Bundle(t).Credentials()
	if err != nil {
		t.Fatal(err)
	}
	return c.FunctionClientConfig()
}

// HTTPClient returns an HTTP client that verifies HTTPFunction's functions.
func HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: ClientTLS(t)}}
}

// HTTPFunction starts `dorylus function` serving HTTPS with Bundle's function certificate and
// requiring Token, with extra flags, and returns its URL once /healthz answers.
func HTTPFunction(t testing.TB, dorylus string, flags ...string) (string, *Process) {
	t.Helper()
	return HTTPFunctionOf(t, dorylus, CredentialsDir(t), flags...)
}

// HTTPFunctionOf is HTTPFunction serving the function certificate of the credentials folder
// creds (pki.Bundle.WriteDir's), returned once it accepts connections.
func HTTPFunctionOf(t testing.TB, dorylus, creds string, flags ...string) (string, *Process) {
	t.Helper()
	addr := loopback.FreeAddr(t)
	p := start(t, nil, dorylus, append([]string{"function", "--listen", addr, "--token-file", TokenFile(t), "--credentials-dir", creds}, flags...)...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "https://" + addr + "/", p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not accepting connections after 30 s:\n%s", addr, tail(p.Output(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Emulator starts aws-lambda-rie running `dorylus function` with extra flags, with env added
// to its environment (e.g. AWS_LAMBDA_FUNCTION_TIMEOUT=2), and returns its endpoint URL (the
// SDK's BaseEndpoint) once it answers.
func Emulator(t testing.TB, rie, dorylus string, env []string, flags ...string) (string, *Process) {
	t.Helper()
	addrs := loopback.FreeAddrs(t, 2)
	addr, api := addrs[0], addrs[1]
	p := start(t, env, rie, append([]string{"--runtime-interface-emulator-address", addr, "--runtime-api-address", api,
		dorylus, "function"}, flags...)...)
	url := "http://" + addr
	waitHTTP(t, p, http.DefaultClient, http.MethodGet, url+"/")
	return url, p
}

// Emulators starts n emulators (one per concurrent call) and returns their endpoints.
func Emulators(t testing.TB, n int, rie, dorylus string, env []string, flags ...string) []string {
	t.Helper()
	var urls []string
	for range n {
		u, _ := Emulator(t, rie, dorylus, env, flags...)
		urls = append(urls, u)
	}
	return urls
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns the contents.
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
