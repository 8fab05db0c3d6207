# Dorylus for Kubernetes. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN ?= bin
FUZZTIME ?= 60s
# One set of build flags for the tests, the binaries the tests build, `make build`, the
# operator's build and the image (static, paths trimmed), so that what one compiles the others
# take from Go's build cache: the image's -trimpath build was a second full compile (345 s cold).
# Only the race detector needs cgo (make test-race).
export CGO_ENABLED := 0
export GOFLAGS := -trimpath -buildvcs=false

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the dorylus data-plane binary into bin/
	$(GO) build -o $(BIN)/dorylus ./runtime/dorylus

.PHONY: lambda
lambda: ## Build `dorylus function` for AWS Lambda (amd64, arm64): bin/lambda/*.zip (provided.al2023) and *.tar (container images)
	hack/lambda/build.sh

.PHONY: run
run: build ## Train GCN on the embedded Cora dataset
	$(BIN)/dorylus train

.PHONY: test test-deps
test: test-deps ## Run every test, the envtest suite on a real kube-apiserver and etcd included (gofmt and vet first)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	KUBEBUILDER_ASSETS=$$(hack/envtest.sh -q) HELM=$(HELM) $(GO) test -timeout 20m $(SLOW_TESTS) ./...

test-deps: ## Install every component make test runs against (hack/test-deps.sh: helm, the Lambda emulator, MinIO, Kueue, envtest, PyTorch)
	hack/test-deps.sh

# The package whose tests take longest (runtime/dorylus: about 250 s, training Cora and CiteSeer
# on server processes, when the others take under 60 s each), named before ./... in make test:
# go test starts packages in the order named (once each), so it runs from the start beside the
# others instead of starting late in import-path order and running on alone.
SLOW_TESTS := ./runtime/dorylus

# Packages whose tests start no process, build no binary and need no envtest: all but the
# operator's envtest suite (the root package, controllers), the tests that build and run the
# dorylus binary or aws-lambda-rie (runtime/dorylus, pkg/dispatch/knative, pkg/dispatch/lambda),
# those that run a MinIO server (pkg/source, pkg/checkpoint, internal/testenv/minio) and the
# e2e test (test/...). -short trims the long property and accuracy tests.
MODULE := github.com/dorylus-gnn/dorylus
UNIT_EXCLUDE := ^$(MODULE)(/controllers|/runtime/dorylus|/pkg/dispatch/knative|/pkg/dispatch/lambda|/pkg/source|/pkg/checkpoint|/internal/testenv/minio|/test/.*)?$$
# The concurrent parts of the data plane, run under the race detector (pkg/dispatch/lambda and
# knative need aws-lambda-rie: hack/tools.sh aws-lambda-rie).
RACE_PKGS ?= ./pkg/pipeline ./pkg/dispatch/... ./pkg/rpc ./runtime/graphserver/... ./runtime/paramserver

.PHONY: test-unit
test-unit: ## Run the fast tests: no envtest, no child processes, no binaries built (-short)
	$(GO) test -short $$($(GO) list ./... | grep -Ev '$(UNIT_EXCLUDE)')

.PHONY: test-race
test-race: ## Run the data plane's concurrent packages under the race detector (-short)
	PATH="$(TOOLS_BIN):$$PATH" CGO_ENABLED=1 $(GO) test -race -short $(RACE_PKGS)

.PHONY: lint
lint: golangci-lint ## Run golangci-lint (pinned, .golangci.yml) over the tree
	$(GOLANGCI_LINT) run ./...

.PHONY: bench
bench: ## Run the kernel, loader and training benchmarks (slow)
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

.PHONY: fuzz
fuzz: ## Fuzz every target (dataset parsers, wire decoders, gRPC and HTTP handlers) for FUZZTIME each (60s)
	hack/fuzz.sh $(FUZZTIME)

.PHONY: fmt
fmt: ## Format the Go sources
	gofmt -w $$(git ls-files '*.go')

include hack/operator.mk
include hack/e2e.mk
