package pki

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReloader loads the function's credentials from a folder, then sees a rotation (another
// bundle written over it) on the next look, and keeps the last good credentials while the
// folder holds a broken key; a folder without the files is refused at once, naming the file.
func TestReloader(t *testing.T) {
	dir := t.TempDir()
	write := func() *Bundle {
		b, err := Issue("ns/job")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := write()
	r, err := NewFunctionReloader(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.every, r.next = 0, time.Time{} // look at every Get
	if got := r.Get().CA(); !bytes.Equal(got, pemDER(t, first.CA)) {
		t.Fatal("the loaded CA is not the bundle's")
	}
	second := write()
	if got := r.Get().CA(); !bytes.Equal(got, pemDER(t, second.CA)) {
		t.Error("a rotation was not loaded")
	}
	if err := os.WriteFile(filepath.Join(dir, FunctionKeyFile), []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := r.Get(); got == nil || !bytes.Equal(got.CA(), pemDER(t, second.CA)) {
		t.Error("a broken key replaced the credentials")
	}
	cert, err := r.HTTPSConfig().GetCertificate(nil)
	if err != nil || !bytes.Equal(cert.Certificate[0], pemDER(t, second.FunctionCert)) {
		t.Errorf("HTTPS certificate: %v, want the second bundle's function certificate", err)
	}
	if _, err := NewFunctionReloader(t.TempDir()); err == nil || !bytes.Contains([]byte(err.Error()), []byte(CAFile)) {
		t.Errorf("an empty folder: %v, want an error naming %s", err, CAFile)
	}
}
