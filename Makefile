# Dorylus for Kubernetes. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN ?= bin
FUZZTIME ?= 60s

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the dorylus data-plane binary into bin/
	$(GO) build -o $(BIN)/dorylus ./runtime/dorylus

.PHONY: run
run: build ## Train GCN on the embedded Cora dataset
	$(BIN)/dorylus train

.PHONY: test
test: helm ## Run every test, the envtest suite on a real kube-apiserver and etcd included (gofmt and vet first)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	KUBEBUILDER_ASSETS=$$(hack/envtest.sh -q) HELM=$(HELM) $(GO) test ./...

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
