#!/usr/bin/env bash
# Regenerates the Go code of pkg/rpc/dorylus.proto. Needs protoc (Debian: protobuf-compiler)
# and the two Go plugins at the versions the generated files name:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$(go env GOPATH)/bin:$PATH"
protoc --proto_path=pkg/rpc \
  --go_out=pkg/rpc --go_opt=paths=source_relative \
  --go-grpc_out=pkg/rpc --go-grpc_opt=paths=source_relative \
  pkg/rpc/dorylus.proto
