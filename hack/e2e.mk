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
# image is this one.
IMAGE_TAG ?= $(shell awk '/^appVersion:/ {gsub(/"/, "", $$2); print $$2}' charts/dorylus-operator/Chart.yaml)
IMAGE_TAR ?= $(BIN)/dorylus-image.tar
# the build flags of the tests (the top-level Makefile's CGO_ENABLED and GOFLAGS), so that
# the image's build reuses their compiles
IMAGE_GOFLAGS = GOOS=linux GOARCH=amd64

.PHONY: image
image: ## Write the runtime image (operator, dorylus, builtin datasets; non-root) as an OCI tarball, bin/dorylus-image.tar, without Docker
	$(IMAGE_GOFLAGS) $(GO) build -ldflags="-s -w -buildid=" -o $(BIN)/image/manager .
	$(IMAGE_GOFLAGS) $(GO) build -ldflags="-s -w -buildid=" -o $(BIN)/image/dorylus ./runtime/dorylus
	$(GO) run ./hack/image runtime --bin $(BIN)/image --tag $(IMAGE_TAG) --out $(IMAGE_TAR)
	@echo "image docker.io/dorylus-gnn/dorylus:$(IMAGE_TAG) in $(IMAGE_TAR) ($$(du -h $(IMAGE_TAR) | cut -f1))"

# The tests' AWS Lambda runtime interface emulator running `dorylus function`
# (both static), the image of the e2e test's emulator pod.
EMULATOR_IMAGE ?= docker.io/dorylus-gnn/lambda-emulator:local
EMULATOR_TAR ?= $(BIN)/lambda-emulator-image.tar

.PHONY: emulator-image
emulator-image: image ## Write the Lambda emulator image (aws-lambda-rie + dorylus function) the e2e test runs in a pod
	$(GO) run ./hack/image custom --name $(EMULATOR_IMAGE) --add "$$(hack/tools.sh aws-lambda-rie 2>/dev/null)/aws-lambda-rie=/aws-lambda-rie" \
		--add $(BIN)/image/dorylus=/dorylus --entrypoint /aws-lambda-rie --out $(EMULATOR_TAR)

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
