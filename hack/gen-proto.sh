#!/usr/bin/env bash
# Regenerates the Go code of pkg/rpc/dorylus.proto (make proto; make check-generated verifies
# it). Needs protoc 3.21.12 (Debian 12: apt-get install protobuf-compiler) and the two Go
# plugins at the versions the generated files name, which hack/tools.sh installs:
#   hack/tools.sh protoc-gen-go protoc-gen-go-grpc   # v1.36.12 and v1.6.2
set -euo pipefail
cd "$(dirname "$0")/.."
PROTOC_VERSION=3.21.12
BIN=${DORYLUS_TOOLS_BIN:-$HOME/.cache/dorylus/bin}
PATH="$BIN:$PATH"
if ! command -v protoc >/dev/null; then
	echo "gen-proto: protoc not found: apt-get install protobuf-compiler (version $PROTOC_VERSION)" >&2
	exit 1
fi
if [[ $(protoc --version) != "libprotoc $PROTOC_VERSION" ]]; then
	echo "gen-proto: $(protoc --version), want libprotoc $PROTOC_VERSION (the version that generated pkg/rpc)" >&2
	exit 1
fi
for p in protoc-gen-go protoc-gen-go-grpc; do
	command -v "$p" >/dev/null || { echo "gen-proto: $p not found: hack/tools.sh $p" >&2; exit 1; }
done
protoc --proto_path=pkg/rpc \
  --go_out=pkg/rpc --go_opt=paths=source_relative \
  --go-grpc_out=pkg/rpc --go-grpc_opt=paths=source_relative \
  pkg/rpc/dorylus.proto
