// Package minio starts and stops a real MinIO server for tests: on loopback only, with a
// temporary data directory and fresh root credentials. The binary is found on PATH or in
// ~/.cache/dorylus/bin, where `hack/tools.sh minio` installs it; when it is missing a test is
// skipped, or fails when the environment variable CI is set.
package minio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dorylus-gnn/dorylus/internal/testenv"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// Region is the region the server's clients sign for.
const Region = "us-east-1"

// Server is a running MinIO server.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string // root user
	SecretKey string // root password
	dir       string
	cmd       *exec.Cmd
	exited    chan struct{}
	stopOnce  sync.Once
	logPath   string
}

// Binary returns the path of the minio binary, or an error saying how to install it.
func Binary() (string, error) {
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err == nil {
		p := filepath.Join(home, ".cache", "dorylus", "bin", "minio")
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("minio binary not found on PATH or in ~/.cache/dorylus/bin; install it with `hack/tools.sh minio`")
}

// Start starts a server for t and stops it when t ends. A missing binary fails t.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		testenv.Missing(t, err.Error())
	}
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartServer starts a server keeping its data under dir (which must exist) and waits until it
// is live. Call Stop when done.
func StartServer(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for try := 0; try < 3; try++ { // a port picked free can be taken before minio binds it
		s, err := start(bin, dir)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bin, dir string) (*Server, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		AccessKey: "dorylus-" + randomHex(4),
		SecretKey: randomHex(16),
		dir:       filepath.Join(dir, "minio-data-"+randomHex(4)),
		exited:    make(chan struct{}),
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	s.logPath = filepath.Join(dir, "minio-"+strconv.Itoa(ports[0])+".log")
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "server", s.dir,
		"--address", "127.0.0.1:"+strconv.Itoa(ports[0]),
		"--console-address", "127.0.0.1:"+strconv.Itoa(ports[1]), "--quiet")
	s.cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("minio: start %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait() // the server's exit is reported through s.exited
		logf.Close()
		close(s.exited)
	}()
	if err := s.waitLive(60 * time.Second); err != nil {
		s.Stop()
		log, _ := os.ReadFile(s.logPath)
		return nil, fmt.Errorf("minio: %w; its log:\n%s", err, log)
	}
	return s, nil
}

// waitLive polls /minio/health/cluster until it answers 200: the server is up and its object
// layer initialised (/minio/health/live answers earlier, while requests still get 503
// XMinioServerNotInitialized).
func (s *Server) waitLive(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return errors.New("server exited during start-up")
		default:
		}
		resp, err := c.Get(s.Endpoint + "/minio/health/cluster")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not live at %s after %v", s.Endpoint, timeout)
}

// Stop terminates the server and waits for it to exit.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.cmd.Process == nil {
			return
		}
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	})
}

// Config returns an objstore configuration for this server (path-style, its endpoint).
func (s *Server) Config() objstore.Config {
	return objstore.Config{Region: Region, Endpoint: s.Endpoint}
}

// CredentialsDir writes the root credentials as a mounted Secret would hold them, into a new
// folder under dir, and returns it.
func (s *Server) CredentialsDir(dir string) (string, error) {
	d := filepath.Join(dir, "credentials-"+randomHex(4))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	for name, v := range map[string]string{"accessKeyID": s.AccessKey, "secretAccessKey": s.SecretKey} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o600); err != nil {
			return "", err
		}
	}
	return d, nil
}

// Env sets, for the rest of t, the environment variables the SDK's default credential chain
// reads (and disables the EC2 metadata lookup, which would leave loopback).
func (s *Server) Env(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", Region)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Client returns an S3 client with the root credentials.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  aws.CredentialsProviderFunc(s.credentials),
	})
}

func (s *Server) credentials(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey, Source: "minio test server"}, nil
}

// Bucket creates a bucket with a fresh name starting with prefix and returns the name.
func (s *Server) Bucket(t testing.TB, prefix string) string {
	t.Helper()
	name := prefix + "-" + randomHex(4)
	if _, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("minio: create bucket %s: %v", name, err)
	}
	return name
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
