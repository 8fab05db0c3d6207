// Package testenv is what the tests that run real components (kube-apiserver and etcd, MinIO,
// Kueue, the Lambda emulator, helm, PyTorch) share: how a test says one is missing. Subpackages
// start the components themselves.
package testenv

import "testing"

// SetUp is the command that installs every component the tests run against.
const SetUp = "hack/test-deps.sh (make test runs it)"

// Missing fails t because a component it runs against is missing; msg names it and the command
// that installs it. A test never skips for a missing component, in CI or outside it: a green run
// tests as much on a newcomer's machine as in CI.
func Missing(t testing.TB, msg string) {
	t.Helper()
	t.Fatalf("%s; %s installs every component the tests need", msg, SetUp)
}
