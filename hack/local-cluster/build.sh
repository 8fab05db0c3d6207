#!/usr/bin/env bash
# Builds kube-controller-manager, kube-scheduler and kubectl from the Go module
# proxy (through the wrapper module hack/local-cluster/k8s) into the folder that
# holds the envtest binaries, and prints that folder. A binary already there at
# the pinned version is kept. Usage: hack/local-cluster/build.sh [-q]
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ASSETS=${DORYLUS_ENVTEST_DIR:-$HOME/.cache/dorylus/k8s-${K8S_VERSION}}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
quiet=${1:-}

log() { if [[ "$quiet" != "-q" ]]; then echo "local-cluster: $*" >&2; fi; }

mkdir -p "$ASSETS"
export GOFLAGS=-buildvcs=false
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=${K8S_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor} -X $pkg.gitTreeState=clean"
done

# build NAME VERSION-COMMAND EXPECTED-LINE
build() {
	local name=$1 check=$2 want=$3
	if [[ -x "$ASSETS/$name" ]] && "$ASSETS/$name" $check 2>/dev/null | grep -x "$want" >/dev/null; then
		log "$name ${K8S_VERSION} present"
		return
	fi
	log "building $name ${K8S_VERSION} (several minutes; shares its build cache with kube-apiserver)"
	(cd "$HERE/k8s" && go build -o "$ASSETS/$name.tmp" -ldflags "$ldflags" "./$name")
	mv "$ASSETS/$name.tmp" "$ASSETS/$name"
}

build kube-controller-manager --version "Kubernetes ${K8S_VERSION}"
build kube-scheduler --version "Kubernetes ${K8S_VERSION}"
build kubectl "version --client" "Client Version: ${K8S_VERSION}"
echo "$ASSETS"
