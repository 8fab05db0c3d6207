#!/usr/bin/env bash
# Builds the local cluster's binaries from the Go module proxy into the folder
# that holds the envtest binaries, and prints that folder: kube-controller-manager,
# kube-scheduler, kubectl, kubelet and kube-proxy (through the wrapper module
# hack/local-cluster/k8s), containerd, containerd-shim-runc-v2 and ctr, and
# CoreDNS (static, for its image), and kube-router (its NetworkPolicy firewall
# only: a test-only enforcer, never shipped). A binary already there at the
# pinned version is kept. runc and the CNI plugins come from Debian (hack/local-cluster/deps.sh).
# Usage: hack/local-cluster/build.sh [-q]
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ASSETS=${DORYLUS_ENVTEST_DIR:-$HOME/.cache/dorylus/k8s-${K8S_VERSION}}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
quiet=""
for a in "$@"; do
	case $a in
	-q) quiet=-q ;;
	*) echo "usage: $0 [-q]" >&2; exit 2 ;;
	esac
done

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
build kubelet --version "Kubernetes ${K8S_VERSION}"
build kube-proxy --version "Kubernetes ${K8S_VERSION}"

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
# The only version the module proxy serves; security flaws are reported for it,
# acceptable for a firewall that only the local cluster runs.
KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION:-v2.1.0}

# install NAME PACKAGE MODULE VERSION [TAGS]: go install, static, unless the
# binary there was built from MODULE at VERSION.
install() {
	local name=$1 pkg=$2 mod=$3 version=$4 tags=${5:-}
	if [[ -x "$ASSETS/$name" ]] && go version -m "$ASSETS/$name" 2>/dev/null | grep -E "^\s+mod\s+${mod}\s+${version}(\s|$)" >/dev/null; then
		log "$name $version present"
		return
	fi
	log "building $name $version"
	local tmp
	tmp=$(mktemp -d)
	CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -tags "$tags" "${pkg}@${version}"
	mv "$tmp/$(basename "$pkg")" "$ASSETS/$name"
	rmdir "$tmp"
}
ctags="no_btrfs no_devmapper no_zfs"
install containerd github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" "$ctags"
install containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" "$ctags"
install ctr github.com/containerd/containerd/v2/cmd/ctr github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" "$ctags"
install coredns github.com/coredns/coredns github.com/coredns/coredns "$COREDNS_VERSION"
install kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router github.com/cloudnativelabs/kube-router/v2 "$KUBE_ROUTER_VERSION"
echo "$ASSETS"
