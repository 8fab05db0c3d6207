package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// Listen opens n listeners on loopback, each on a port of its own.
func Listen(n int) ([]net.Listener, error) {
	var out []net.Listener
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			CloseAll(out)
			return nil, fmt.Errorf("listen on loopback: %w", err)
		}
		out = append(out, lis)
	}
	return out, nil
}

// Addrs returns the address of every listener.
func Addrs(ls []net.Listener) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Addr().String())
	}
	return out
}

// CloseAll closes every listener.
func CloseAll(ls []net.Listener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}

// SetAddresses places c's graph servers at peers and its parameter-server shards at shards
// (host:port, on one port each: those of the first) and validates the result.
func SetAddresses(c *jobconfig.RunConfig, peers, shards []string) error {
	port, err := portOf(peers[0])
	if err != nil {
		return err
	}
	c.GraphServers.Replicas, c.GraphServers.Port, c.GraphServers.Peers = len(peers), port, peers
	if len(shards) > 0 {
		if port, err = portOf(shards[0]); err != nil {
			return err
		}
		c.ParameterServers = jobconfig.ParameterServers{Replicas: len(shards), Port: port, Service: shards[0], Shards: shards}
	}
	return c.Validate()
}

// portOf returns the port of a host:port address.
func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// WriteConfig writes a run config to path, as the operator's ConfigMap holds it.
func WriteConfig(path string, c *jobconfig.RunConfig) error {
	data, err := jobconfig.Marshal(c)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// UsagePath is the usage file (--usage-file) of graph server q in the run of seed launched
// with work as its folder.
func UsagePath(work string, seed uint64, q int) string {
	return filepath.Join(work, fmt.Sprintf("usage-%d-%d.json", seed, q))
}

// ReadUsage reads the usage files of the n graph servers of the run of seed, which they
// write when they stop.
func ReadUsage(work string, seed uint64, n int) ([]backends.Usage, error) {
	out := make([]backends.Usage, n)
	for q := range out {
		data, err := os.ReadFile(UsagePath(work, seed, q))
		if err != nil {
			return nil, fmt.Errorf("usage of graph server %d: %w", q, err)
		}
		if err := json.Unmarshal(data, &out[q]); err != nil {
			return nil, fmt.Errorf("usage of graph server %d: %s: %w", q, UsagePath(work, seed, q), err)
		}
	}
	return out, nil
}

// TracePath is the timeline (--trace) of graph server q of a run launched with Options.Trace.
func TracePath(work string, q int) string {
	return filepath.Join(work, fmt.Sprintf("trace-%d.json", q))
}

// MergeTraces merges the timelines of the n graph servers of a run launched with
// Options.Trace, which they write when they stop, into one.
func MergeTraces(work string, n int) (trace.File, error) {
	files := make([]trace.File, n)
	for q := range files {
		f, err := os.Open(TracePath(work, q))
		if err != nil {
			return trace.File{}, fmt.Errorf("trace of graph server %d: %w", q, err)
		}
		files[q], err = trace.Read(f)
		f.Close()
		if err != nil {
			return trace.File{}, fmt.Errorf("trace of graph server %d: %w", q, err)
		}
	}
	return trace.Merge(files...), nil
}

// WorkDir makes the folder of one launcher's run, kind-PID-* (its run config, the run's key
// and token when it issues them, the servers' usage files and timelines), in the launchers'
// folder of this user under the system's temporary folder, readable by the user alone. It
// first removes the folders of launchers that no longer run, so that what a killed launcher
// (SIGKILL, which runs no deferred removal) left, its key among it, lasts only until the next
// start. Remove the folder when the run ends.
func WorkDir(kind string) (string, error) {
	parent := filepath.Join(os.TempDir(), fmt.Sprintf("dorylus-runs-%d", os.Getuid()))
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("launcher: %w", err)
	}
	st, err := os.Lstat(parent)
	if err != nil {
		return "", fmt.Errorf("launcher: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !st.IsDir() || st.Mode().Perm() != 0o700 || !ok || int(sys.Uid) != os.Getuid() {
		return "", fmt.Errorf("launcher: %s is not a folder of this user's alone (%v)", parent, st.Mode())
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return "", fmt.Errorf("launcher: %w", err)
	}
	for _, e := range entries {
		if pid, ok := launcherPid(e.Name()); ok && !running(pid) {
			_ = os.RemoveAll(filepath.Join(parent, e.Name())) // a concurrent start may remove it first
		}
	}
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("%s-%d-*", kind, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("launcher: %w", err)
	}
	return dir, nil
}

// launcherPid returns the pid in the name of a WorkDir folder, kind-PID-random.
func launcherPid(name string) (int, bool) {
	parts := strings.Split(name, "-")
	if len(parts) < 3 {
		return 0, false
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	return pid, err == nil && pid > 0
}

// running reports whether process pid exists (of this user or another).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
