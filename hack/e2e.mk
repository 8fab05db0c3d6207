# End-to-end targets: a local cluster whose node agent runs pods as OS
# processes (hack/local-cluster), and the e2e test against it (test/e2e, build
# tag e2e). Included by the top-level Makefile. Needs root.

LOCAL_CLUSTER_DIR ?= $(HOME)/.cache/dorylus/local-cluster
export LOCAL_CLUSTER_DIR

.PHONY: local-cluster local-cluster-down e2e e2e-timing e2e-binaries

e2e-binaries:
	go build -o bin/manager .
	go build -o bin/dorylus ./runtime/dorylus
	go build -o bin/nodeagent ./test/nodeagent

local-cluster: e2e-binaries helm ## Start etcd, kube-apiserver, controller-manager, scheduler and the process node agent on loopback (root)
	hack/local-cluster/cluster.sh up

local-cluster-down: ## Stop exactly the processes local-cluster started
	hack/local-cluster/cluster.sh down

e2e: local-cluster ## helm install the operator on the local cluster, train Cora through it, compare with the single-process run
	HELM=$(HELM) go test -tags e2e -count=1 -v -timeout 20m ./test/e2e; rc=$$?; hack/local-cluster/cluster.sh down; exit $$rc

e2e-timing: local-cluster ## Print apply→Succeeded for Cora with 2 graph servers and its split, alone and 4 jobs at once
	HELM=$(HELM) DORYLUS_E2E_TIMING=1 go test -tags e2e -count=1 -v -timeout 20m -run TestTiming ./test/e2e; rc=$$?; hack/local-cluster/cluster.sh down; exit $$rc

# The runtime image, written without Docker (hack/image): the same bytes for
# the same commit. Its tag is the chart's appVersion, so the chart's default
# image is this one.
IMAGE_TAG ?= $(shell awk '/^appVersion:/ {gsub(/"/, "", $$2); print $$2}' charts/dorylus-operator/Chart.yaml)
IMAGE_TAR ?= $(BIN)/dorylus-image.tar
IMAGE_GOFLAGS = CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOFLAGS=-buildvcs=false

.PHONY: image
image: ## Write the runtime image (operator, dorylus, builtin datasets; non-root) as an OCI tarball, bin/dorylus-image.tar, without Docker
	$(IMAGE_GOFLAGS) $(GO) build -trimpath -ldflags="-s -w -buildid=" -o $(BIN)/image/manager .
	$(IMAGE_GOFLAGS) $(GO) build -trimpath -ldflags="-s -w -buildid=" -o $(BIN)/image/dorylus ./runtime/dorylus
	$(GO) run ./hack/image runtime --bin $(BIN)/image --tag $(IMAGE_TAG) --out $(IMAGE_TAR)
	@echo "image docker.io/dorylus-gnn/dorylus:$(IMAGE_TAG) in $(IMAGE_TAR) ($$(du -h $(IMAGE_TAR) | cut -f1))"
