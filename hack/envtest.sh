#!/usr/bin/env bash
# Builds kube-apiserver and etcd for envtest from the Go module proxy (through
# the wrapper modules under hack/envtest/) into a cache folder outside the
# clone, and prints that folder. A binary already there at the pinned version
# is kept. Usage: hack/envtest.sh [-q]   (-q: print only the folder)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
ASSETS=${DORYLUS_ENVTEST_DIR:-$HOME/.cache/dorylus/k8s-${K8S_VERSION}}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quiet=${1:-}

log() { if [[ "$quiet" != "-q" ]]; then echo "envtest: $*" >&2; fi; }

mkdir -p "$ASSETS"
export GOFLAGS=-buildvcs=false

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
if [[ -x "$ASSETS/kube-apiserver" ]] && "$ASSETS/kube-apiserver" --version 2>/dev/null | grep -x "Kubernetes ${K8S_VERSION}" >/dev/null; then
	log "kube-apiserver ${K8S_VERSION} present"
else
	log "building kube-apiserver ${K8S_VERSION} (about 10 min, 2.4 GB memory)"
	(cd "$ROOT/hack/envtest/kube-apiserver" && go build -o "$ASSETS/kube-apiserver.tmp" -ldflags "\
-X k8s.io/component-base/version.gitVersion=${K8S_VERSION} \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=${minor} \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION} \
-X k8s.io/client-go/pkg/version.gitMajor=1 \
-X k8s.io/client-go/pkg/version.gitMinor=${minor} \
-X k8s.io/client-go/pkg/version.gitTreeState=clean" .)
	mv "$ASSETS/kube-apiserver.tmp" "$ASSETS/kube-apiserver"
fi

if [[ -x "$ASSETS/etcd" ]] && "$ASSETS/etcd" --version 2>/dev/null | grep "etcd Version: ${ETCD_VERSION}$" >/dev/null; then
	log "etcd ${ETCD_VERSION} present"
else
	log "building etcd ${ETCD_VERSION} (about 1.5 min)"
	(cd "$ROOT/hack/envtest/etcd" && go build -o "$ASSETS/etcd.tmp" .)
	mv "$ASSETS/etcd.tmp" "$ASSETS/etcd"
fi

if [[ "$quiet" != "-q" ]]; then "$ASSETS/kube-apiserver" --version >&2 2>/dev/null || true; fi
echo "$ASSETS"
