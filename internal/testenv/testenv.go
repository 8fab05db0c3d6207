// Package testenv is what the tests that run real components (kube-apiserver and etcd, MinIO,
// Kueue, the Lambda emulator, helm, PyTorch) share: how a test says one is missing. Subpackages
// start the components themselves.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// SetUp is the command that installs every component the tests run against.
const SetUp = "hack/test-deps.sh (make test runs it)"

// Missing fails t because a component it runs against is missing; msg names it and the command
// that installs it. A test never skips for a missing component, in CI or outside it: a green run
// tests as much on a newcomer's machine as in CI.
func Missing(t testing.TB, msg string) {
	t.Helper()
	t.Fatalf("%s; %s installs every component the tests need", msg, SetUp)
}

// PythonWithTorch returns a Python that imports torch and numpy (Debian's python3-torch and
// python3-numpy): $DORYLUS_PYTHON, python3 on PATH, or /usr/bin/python3. Without one t fails,
// naming the command that installs it.
func PythonWithTorch(t testing.TB) string {
	t.Helper()
	for _, c := range []string{os.Getenv("DORYLUS_PYTHON"), "python3", "/usr/bin/python3"} {
		if c == "" {
			continue
		}
		if err := exec.Command(c, "-c", "import torch, numpy").Run(); err == nil {
			return c
		}
	}
	Missing(t, "no python3 with torch and numpy (apt-get install python3-torch python3-numpy, or set DORYLUS_PYTHON)")
	return ""
}
