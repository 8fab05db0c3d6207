package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dorylus-gnn/dorylus/internal/procmem"
)

// Process is one server process started by StartServer.
type Process struct {
	// Name names the server in logs and errors ("graph-server 1").
	Name string
	// Cmd is the running command.
	Cmd *exec.Cmd
	// Err is Wait's result, set once Done is closed.
	Err   error
	stdin io.WriteCloser
	log   *tailWriter
	done  chan struct{}  // closed when the process has exited
	mem   procmem.Memory // the last read of its memory while it ran (the reader's goroutine)
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Tail returns the last lines the process wrote to its standard error, for an error message:
// ": line; line", or "" if none.
func (p *Process) Tail() string { return p.log.tail() }

// memorySample is how often a run reads its servers' memory, so that it can say what a
// server held when it died (the kernel's OOM killer sends SIGKILL).
const memorySample = 500 * time.Millisecond

// sample reads the process's memory while it runs; one that has exited keeps its last read
// (its pid may be another process's by now).
func (p *Process) sample() {
	select {
	case <-p.done:
		return
	default:
	}
	if m := procmem.Read(p.Cmd.Process.Pid); m.Peak > 0 {
		p.mem = m
	}
}

// died describes how the process ended, with its memory when last read.
func (p *Process) died() string {
	if p.mem.Peak == 0 {
		return p.Err.Error()
	}
	return fmt.Sprintf("%v; resident %d MiB when last read, peak %d MiB", p.Err, p.mem.Resident>>20, p.mem.Peak>>20)
}

// StartServer starts `exe args...` serving on lis (inherited as fd 3), with its standard
// output to out (discarded if nil; closed when the process exits if it is an *io.PipeWriter),
// its standard error to stderr prefixed by its name, and in its own process group, so that a
// terminal's Ctrl-C reaches only the launcher, which stops it. It stops by itself when its
// standard input closes (the launcher exiting, even killed). Once it has exited it is sent on
// exited.
func StartServer(exe, name string, lis net.Listener, out, stderr io.Writer, exited chan<- *Process, args ...string) (*Process, error) {
	f, err := lis.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer f.Close()
	cmd := exec.Command(exe, append(args, "--listen-fd", "3", "--stop-on-stdin-eof")...)
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Process{Name: name, Cmd: cmd, log: &tailWriter{prefix: "[" + name + "] ", out: stderr}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, p.log
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.Err = cmd.Wait()
		if w, ok := out.(*io.PipeWriter); ok {
			w.Close()
		}
		close(p.done)
		exited <- p
	}()
	return p, nil
}

// StopAll closes every process's standard input, which stops it, and kills the process
// groups of those still running after five seconds; it returns once all have exited.
func StopAll(procs []*Process) {
	for _, p := range procs {
		p.stdin.Close()
	}
	deadline := time.After(5 * time.Second)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL) // its group may be gone already
			<-p.done
		}
	}
}

// exitSettle is how long a run waits, after a server exits, for another that a signal
// killed: the peers of a killed server exit too, often first, when its connections reset.
const exitSettle = 500 * time.Millisecond

// exitCause returns, of first (the first server to exit) and those exiting within exitSettle
// after it, the first a signal killed, else first: the cause, not a peer that exited
// because of it.
func exitCause(first *Process, exited <-chan *Process) *Process {
	if signaled(first.Err) {
		return first
	}
	timer := time.NewTimer(exitSettle)
	defer timer.Stop()
	for {
		select {
		case p := <-exited:
			if signaled(p.Err) {
				return p
			}
		case <-timer.C:
			return first
		}
	}
}

// signaled reports whether err is the exit of a process a signal killed.
func signaled(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// tailWriter forwards a process's log lines with a prefix and keeps the last few.
type tailWriter struct {
	mu     sync.Mutex
	prefix string
	out    io.Writer
	buf    []byte
	last   []string
}

// Write implements io.Writer.
func (w *tailWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, line)
		if w.last = append(w.last, line); len(w.last) > 5 {
			w.last = w.last[1:]
		}
	}
	return len(b), nil
}

// tail returns the last lines the process wrote, for an error message.
func (w *tailWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return ""
	}
	return ": " + strings.Join(w.last, "; ")
}
