#!/usr/bin/env bash
# Installs the pinned tools (controller-gen, helm, golangci-lint, the protoc
# plugins; the AWS Lambda runtime interface emulator, the MinIO server and the
# Kueue manager the tests run against) with
# `go install` into a cache folder outside the clone, so a fresh clone reuses
# them. A binary already there whose embedded module version matches is kept.
# Prints the folder.
# Usage: hack/tools.sh [controller-gen|helm|golangci-lint|protoc-gen-go|protoc-gen-go-grpc|aws-lambda-rie|minio|kueue]...
# protoc itself is Debian's protobuf-compiler (3.21.12 generated pkg/rpc); hack/gen-proto.sh checks it.
set -euo pipefail

BIN=${DORYLUS_TOOLS_BIN:-$HOME/.cache/dorylus/bin}
CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:-v0.23.0}
HELM_VERSION=${HELM_VERSION:-v4.3.2}
RIE_VERSION=${RIE_VERSION:-v0.0.0-20261030222936-bef5c4ba774d}
MINIO_VERSION=${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}
GOLANGCI_LINT_VERSION=${GOLANGCI_LINT_VERSION:-v2.15.0}
# Kueue's own module (k8s.io v0.35): built apart, never in our go.mod
KUEUE_VERSION=${KUEUE_VERSION:-v0.17.0}
# the versions that generated pkg/rpc/*.pb.go (their headers name them)
PROTOC_GEN_GO_VERSION=${PROTOC_GEN_GO_VERSION:-v1.36.12}
PROTOC_GEN_GO_GRPC_VERSION=${PROTOC_GEN_GO_GRPC_VERSION:-v1.6.2}
mkdir -p "$BIN"
export GOFLAGS=-buildvcs=false

# install NAME PACKAGE MODULE VERSION [static]: go install (with static,
# CGO_ENABLED=0), unless the binary there was built so from MODULE at VERSION.
install() {
	local name=$1 pkg=$2 mod=$3 version=$4 static=${5:-}
	local cgo=${static:+0}
	if [[ -x "$BIN/$name" ]] && go version -m "$BIN/$name" 2>/dev/null | grep -E "^\s+mod\s+${mod}\s+${version}(\s|$)" >/dev/null &&
		{ [[ -z "$static" ]] || go version -m "$BIN/$name" | grep -E "^\s+build\s+CGO_ENABLED=0$" >/dev/null; }; then
		echo "tools: $name $version present" >&2
		return
	fi
	echo "tools: installing $name $version" >&2
	CGO_ENABLED=${cgo:-${CGO_ENABLED:-1}} GOBIN="$BIN" go install "${pkg}@${version}"
}

want=("$@")
if [[ ${#want[@]} -eq 0 ]]; then want=(controller-gen helm); fi
for t in "${want[@]}"; do
	case $t in
	controller-gen) install controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen sigs.k8s.io/controller-tools "$CONTROLLER_GEN_VERSION" ;;
	helm) install helm helm.sh/helm/v4/cmd/helm helm.sh/helm/v4 "$HELM_VERSION" ;;
	golangci-lint) install golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint github.com/golangci/golangci-lint/v2 "$GOLANGCI_LINT_VERSION" ;;
	protoc-gen-go) install protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/protobuf "$PROTOC_GEN_GO_VERSION" ;;
	protoc-gen-go-grpc) install protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" ;;
	aws-lambda-rie) install aws-lambda-rie github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie github.com/aws/aws-lambda-runtime-interface-emulator "$RIE_VERSION" static ;; # static: the e2e test's emulator image has no C library
	minio) install minio github.com/minio/minio github.com/minio/minio "$MINIO_VERSION" ;;
	kueue) install kueue sigs.k8s.io/kueue/cmd/kueue sigs.k8s.io/kueue "$KUEUE_VERSION" static ;; # static: its image has no C library
	*) echo "tools: unknown tool $t" >&2; exit 2 ;;
	esac
done
echo "$BIN"
