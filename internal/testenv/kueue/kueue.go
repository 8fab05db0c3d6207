// Package kueue runs a real Kueue manager against a test API server. Kueue
// (sigs.k8s.io/kueue) is built from its own module, never from this one (it
// pins other k8s.io releases): `hack/tools.sh kueue` installs it into
// ~/.cache/dorylus/bin. Its CRDs are read from the same module version in the
// Go module cache. A missing binary fails a test, naming the command that
// installs it.
package kueue

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dorylus-gnn/dorylus/internal/testenv"
)

// Module is Kueue's Go module.
const Module = "sigs.k8s.io/kueue"

// secretName is the Secret Kueue keeps its webhook certificates in.
const secretName = "kueue-webhook-server-cert"

// Binary returns the path of the kueue manager binary and its module
// version, or an error saying how to install it.
func Binary() (path, version string, err error) {
	path, err = exec.LookPath("kueue")
	if err != nil {
		home, herr := os.UserHomeDir()
		if herr != nil {
			return "", "", herr
		}
		path = filepath.Join(home, ".cache", "dorylus", "bin", "kueue")
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("kueue manager not found on PATH or in ~/.cache/dorylus/bin (%w); install it with `hack/tools.sh kueue`", err)
	}
	if info.Main.Path != Module {
		return "", "", fmt.Errorf("%s was built from %s, not %s", path, info.Main.Path, Module)
	}
	return path, info.Main.Version, nil
}

// CRDDir is the folder of Kueue's CRDs at version in the Go module cache,
// downloaded there first when missing.
func CRDDir(version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", Module+"@"+version)
	cmd.Dir = os.TempDir() // outside any module: go.mod is not touched
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", Module, version, err, stderr.String())
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no module folder in %q", Module, version, out)
	}
	return filepath.Join(m.Dir, "config", "components", "crd", "bases"), nil
}

// Manager is a running Kueue manager.
type Manager struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

// Config is what a test chooses of the manager's configuration.
type Config struct {
	// Namespace is Kueue's own; it must exist and hold an (empty) Secret
	// kueue-webhook-server-cert, where Kueue keeps its webhook certificates.
	Namespace string
	// ExternalFrameworks are the job kinds integrated outside Kueue, as
	// Kind.version.group.
	ExternalFrameworks []string
	// WebhookPort is the loopback port of Kueue's webhook server; 0 picks a
	// free one.
	WebhookPort int
}

// Start starts the manager with kubeconfig against the API server it names
// and waits until it is ready; it stops when t ends. Its webhooks are served
// on loopback but registered nowhere: the test API server calls none of them.
func Start(t testing.TB, kubeconfig []byte, cfg Config) *Manager {
	t.Helper()
	bin, _, err := Binary()
	if err != nil {
		testenv.Missing(t, err.Error())
	}
	dir := t.TempDir()
	health, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	webhook := cfg.WebhookPort
	if webhook == 0 {
		if webhook, err = FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	frameworks, _ := json.Marshal(cfg.ExternalFrameworks)
	conf := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health: {healthProbeBindAddress: "127.0.0.1:%d"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: %d, certDir: %s}
leaderElection: {leaderElect: false}
integrations:
  frameworks: ["batch/job"]
  externalFrameworks: %s
`, cfg.Namespace, health, webhook, filepath.Join(dir, "certs"), frameworks)
	for name, data := range map[string][]byte{"config.yaml": []byte(conf), "kubeconfig": kubeconfig} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := &Manager{exited: make(chan struct{}), logPath: filepath.Join(dir, "kueue.log")}
	logFile, err := os.Create(m.logPath)
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command(bin, "--config", filepath.Join(dir, "config.yaml"), "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--feature-gates", "VisibilityOnDemand=false", "--zap-log-level", "2")
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive a killed test
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = m.cmd.Wait(); _ = logFile.Close(); close(m.exited) }()
	if err := m.mountCerts(kubeconfig, cfg.Namespace, filepath.Join(dir, "certs")); err != nil {
		m.stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.stop()
		if t.Failed() {
			t.Logf("kueue manager log (last 8 KiB):\n%s", m.logTail(8<<10))
		}
	})
	if err := m.waitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", health), 90*time.Second); err != nil {
		t.Fatalf("kueue manager: %v\n%s", err, m.logTail(8<<10))
	}
	return m
}

// mountCerts plays the kubelet: until the manager exits it copies the
// certificates Kueue writes into its Secret to the folder its webhook server
// reads them from (where a pod mounts the Secret).
func (m *Manager) mountCerts(kubeconfig []byte, namespace, dir string) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { <-m.exited; cancel() }()
		for ctx.Err() == nil {
			if s, err := cs.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{}); err == nil {
				for k, v := range s.Data {
					if old, err := os.ReadFile(filepath.Join(dir, k)); err != nil || !bytes.Equal(old, v) {
						_ = os.WriteFile(filepath.Join(dir, k+".tmp"), v, 0o600)
						_ = os.Rename(filepath.Join(dir, k+".tmp"), filepath.Join(dir, k))
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return nil
}

// waitReady polls the readiness endpoint until it answers 200.
func (m *Manager) waitReady(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-m.exited:
			return errors.New("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v", timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (m *Manager) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// logTail is the end of the manager's log.
func (m *Manager) logTail(n int) string {
	b, _ := os.ReadFile(m.logPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// FreePort is a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
