package pki

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Reloader holds credentials loaded from a folder, typically a mounted Secret that the kubelet
// updates in place when the job's credentials rotate, and loads them again once the folder's
// files have changed, looking at most once a second. A reload that fails keeps the credentials
// loaded before (the kubelet replaces the files one update at a time, so the next look finds
// them whole).
type Reloader struct {
	dir   string
	files []string
	load  func(string) (*Credentials, error)
	every time.Duration

	mu    sync.Mutex
	cur   *Credentials
	stamp string
	next  time.Time
}

// NewFunctionReloader loads the HTTP function's credentials from dir (LoadFunction).
func NewFunctionReloader(dir string) (*Reloader, error) {
	r := &Reloader{dir: dir, files: []string{CAFile, FunctionCertFile, FunctionKeyFile}, load: LoadFunction, every: time.Second}
	stamp, err := r.stampNow()
	if err != nil {
		return nil, err
	}
	if r.cur, err = r.load(dir); err != nil {
		return nil, err
	}
	r.stamp, r.next = stamp, time.Now().Add(r.every)
	return r, nil
}

// stampNow describes the files' versions: their sizes and modification times.
func (r *Reloader) stampNow() (string, error) {
	var s string
	for _, f := range r.files {
		st, err := os.Stat(filepath.Join(r.dir, f))
		if err != nil {
			return "", fmt.Errorf("load TLS credentials: %w", err)
		}
		s += fmt.Sprintf("%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return s, nil
}

// Get returns the newest credentials that loaded.
func (r *Reloader) Get() *Credentials {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.After(r.next) {
		r.next = now.Add(r.every)
		if stamp, err := r.stampNow(); err == nil && stamp != r.stamp {
			if c, err := r.load(r.dir); err == nil {
				r.cur, r.stamp = c, stamp
			}
		}
	}
	return r.cur
}

// HTTPSConfig is the TLS configuration of the HTTP function's server: TLS 1.3, presenting the
// newest function certificate, asking for no client certificate (callers bring the job's
// bearer token).
func (r *Reloader) HTTPSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return &r.Get().cert, nil
	}}
}
