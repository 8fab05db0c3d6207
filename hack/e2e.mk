# End-to-end targets: a real one-node cluster on this machine
# (hack/local-cluster: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, containerd with runc and CNI, kubelet, kube-proxy, CoreDNS)
# running the project's own image, and the e2e test against it (test/e2e,
# build tag e2e). Included by the top-level Makefile. Needs root.

LOCAL_CLUSTER_DIR ?= $(HOME)/.cache/dorylus/local-cluster
export LOCAL_CLUSTER_DIR
E2E_TIMEOUT ?= 45m
# Tests run this many at a time: most of a test is waiting for pods and epochs.
E2E_PARALLEL ?= 3

# The runtime image, written without Docker (hack/image): the same bytes for
# the same commit. Its tag is the chart's appVersion, so the chart's default
# image is this one. One OCI image index of a linux image per architecture of
# IMAGE_ARCHES, which share the datasets' layer; containerd, kubelet and
# registries pick the node's own.
IMAGE_TAG ?= $(shell awk '/^appVersion:/ {gsub(/"/, "", $$2); print $$2}' charts/dorylus-operator/Chart.yaml)
IMAGE_TAR ?= $(BIN)/dorylus-image.tar
IMAGE_ARCHES ?= amd64 arm64
# The build flags of the tests (the top-level Makefile's CGO_ENABLED and GOFLAGS), so that the
# image's amd64 build reuses their compiles; arm64's is a compile of its own (README).
IMAGE_LDFLAGS = -ldflags="-s -w -buildid="

# The image is written again only when a file it is built from or holds may have changed (any
# file git tracks or would but Go tests, compared by time) or IMAGE_ARCHES or IMAGE_TAG did
# (IMAGE_ARGS holds them): make test-arm64, make e2e and the quick start's make local-cluster
# each need it, and writing it takes about 35 s of CPU even with every compile cached.
IMAGE_ARGS := $(BIN)/image.args
$(shell mkdir -p $(BIN) && a='$(IMAGE_ARCHES) $(IMAGE_TAG)' && { [ "$$(cat $(IMAGE_ARGS) 2>/dev/null)" = "$$a" ] || echo "$$a" > $(IMAGE_ARGS); })
IMAGE_INPUTS := $(filter-out %_test.go,$(wildcard $(shell git ls-files --cached --others --exclude-standard 2>/dev/null)))

.PHONY: image
image: $(IMAGE_TAR) ## Write the runtime image (operator, dorylus, builtin datasets; non-root; linux/amd64 and linux/arm64) as an OCI tarball, bin/dorylus-image.tar, without Docker

$(IMAGE_TAR): $(IMAGE_INPUTS) $(IMAGE_ARGS)
	for arch in $(IMAGE_ARCHES); do \
		GOOS=linux GOARCH=$$arch $(GO) build $(IMAGE_LDFLAGS) -o $(BIN)/image/$$arch/manager . && \
		GOOS=linux GOARCH=$$arch $(GO) build $(IMAGE_LDFLAGS) -o $(BIN)/image/$$arch/dorylus ./runtime/dorylus || exit 1; \
	done
	$(GO) run ./hack/image runtime $(foreach a,$(IMAGE_ARCHES),--bin $(a)=$(BIN)/image/$(a)) --tag $(IMAGE_TAG) --out $(IMAGE_TAR)
	@echo "image docker.io/dorylus-gnn/dorylus:$(IMAGE_TAG) for $(addprefix linux/,$(IMAGE_ARCHES)) in $(IMAGE_TAR) ($$(du -h $(IMAGE_TAR) | cut -f1))"

# The image's arm64 half, tested on this amd64 machine under Debian's qemu-aarch64-static (user
# emulation, run explicitly: no binfmt_misc handler needed): pkg/tensor's tests, -short (its
# kernels are portable Go on arm64; emulated, -short takes 29 s on 2 quiet cores, the whole suite
# 568 s on busy ones), and Cora trained by the image's arm64 dorylus to the accuracy of its amd64
# one within a point (hack/image's TestArm64TrainsCora, 15 s).
.PHONY: test-arm64
test-arm64: image ## Test the image's linux/arm64 half under qemu-aarch64-static: pkg/tensor's tests; Cora trains to amd64's accuracy within a point
	GOARCH=arm64 $(GO) test -short -exec qemu-aarch64-static ./pkg/tensor/...
	$(GO) test -tags qemu -v -run '^TestArm64TrainsCora$$' ./hack/image

# The tests' AWS Lambda runtime interface emulator running `dorylus function`
# (both static), the image of the e2e test's emulator pod.
EMULATOR_IMAGE ?= docker.io/dorylus-gnn/lambda-emulator:local
EMULATOR_TAR ?= $(BIN)/lambda-emulator-image.tar

.PHONY: emulator-image
emulator-image: image ## Write the Lambda emulator image (aws-lambda-rie + dorylus function) the e2e test runs in a pod
	$(GO) run ./hack/image custom --name $(EMULATOR_IMAGE) --add "$$(hack/tools.sh aws-lambda-rie 2>/dev/null)/aws-lambda-rie=/aws-lambda-rie" \
		--add $(BIN)/image/amd64/dorylus=/dorylus --entrypoint /aws-lambda-rie --out $(EMULATOR_TAR)

.PHONY: local-cluster local-cluster-down kueue e2e e2e-quickstart e2e-timing

local-cluster: image helm ## Start the real one-node cluster with the runtime image imported (root)
	hack/local-cluster/deps.sh
	hack/local-cluster/cluster.sh up $(IMAGE_TAR)

kueue: ## Install Kueue on the running local cluster (hack/local-cluster/kueue.sh up; before the operator starts)
	hack/local-cluster/kueue.sh up

local-cluster-down: ## Stop the local cluster and undo its changes to the host (pids, mounts, bridge, sysctls, netfilter)
	hack/local-cluster/cluster.sh down

# The suite runs on the cluster local-cluster started; TestQuickStart, after it has stopped,
# runs the README's quick start verbatim, which starts and stops a cluster of its own.
E2E_QUICKSTART = go test -tags e2e -count=1 -v -timeout 30m -run '^TestQuickStart$$' ./test/e2e
e2e: emulator-image local-cluster build ## helm install the operator on the local cluster, run every sample and the disturbances, compare with dorylus train; then the README's quick start
	{ hack/local-cluster/cluster.sh import $(EMULATOR_TAR) && hack/local-cluster/kueue.sh up; } || { hack/local-cluster/cluster.sh down; exit 1; }
	HELM=$(HELM) go test -tags e2e -count=1 -v -parallel $(E2E_PARALLEL) -timeout $(E2E_TIMEOUT) -skip '^TestQuickStart$$' ./test/e2e; rc=$$?; \
		hack/local-cluster/cluster.sh down; $(E2E_QUICKSTART) || rc=1; exit $$rc

e2e-quickstart: ## Run the README's quick start as written (TestQuickStart: make local-cluster … make local-cluster-down; root, no cluster running)
	$(E2E_QUICKSTART)

e2e-timing: local-cluster ## Print apply→Succeeded for Cora with 2 graph servers and its split, alone and 4 jobs at once
	HELM=$(HELM) DORYLUS_E2E_TIMING=1 go test -tags e2e -count=1 -v -timeout $(E2E_TIMEOUT) -run TestTiming ./test/e2e; rc=$$?; hack/local-cluster/cluster.sh down; exit $$rc
