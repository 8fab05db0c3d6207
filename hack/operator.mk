# Control-plane targets: the GNNTrainingJob API, the operator, its manifests,
# the Helm chart and the envtest suite. Included by the top-level Makefile.
# Tools and the test control plane are cached outside the clone, so a fresh
# clone (CI) reuses them.

DORYLUS_CACHE ?= $(HOME)/.cache/dorylus
TOOLS_BIN ?= $(DORYLUS_CACHE)/bin
K8S_VERSION ?= v1.37.2
ENVTEST_ASSETS ?= $(DORYLUS_CACHE)/k8s-$(K8S_VERSION)
CONTROLLER_GEN ?= $(TOOLS_BIN)/controller-gen
HELM ?= $(TOOLS_BIN)/helm
GOLANGCI_LINT ?= $(TOOLS_BIN)/golangci-lint
OPERATOR_PKGS ?= . ./api/... ./controllers/... ./pkg/jobconfig/... ./pkg/jobstatus/...
GENERATED_PATHS ?= api config charts pkg/rpc pkg/tensor/*_amd64.s

export DORYLUS_TOOLS_BIN := $(TOOLS_BIN)
export DORYLUS_ENVTEST_DIR := $(ENVTEST_ASSETS)

.PHONY: tools controller-gen helm golangci-lint proto asm generate manifests check-generated envtest test-operator \
	vet-operator helm-lint build-operator scale-test

tools: ## Install the pinned controller-gen, helm, golangci-lint and protoc plugins into $(TOOLS_BIN)
	hack/tools.sh controller-gen helm golangci-lint protoc-gen-go protoc-gen-go-grpc

controller-gen: ## Install the pinned controller-gen (v0.23.0) into $(TOOLS_BIN)
	@hack/tools.sh controller-gen >/dev/null

helm: ## Install the pinned helm (v4.3.2) into $(TOOLS_BIN)
	@hack/tools.sh helm >/dev/null

golangci-lint: ## Install the pinned golangci-lint (v2.15.0) into $(TOOLS_BIN)
	@hack/tools.sh golangci-lint >/dev/null

proto: ## Regenerate pkg/rpc's Go code from dorylus.proto (protoc 3.21.12, Debian's protobuf-compiler)
	@hack/tools.sh protoc-gen-go protoc-gen-go-grpc >/dev/null
	hack/gen-proto.sh

asm: ## Regenerate pkg/tensor's amd64 assembly kernels (pkg/tensor/internal/asmgen)
	cd pkg/tensor && go run ./internal/asmgen

generate: controller-gen ## Generate the API's deepcopy code with controller-gen
	$(CONTROLLER_GEN) object paths=./api/...

manifests: controller-gen ## Generate the CRD and RBAC manifests (config/) and sync the chart (CRDs, ClusterRole)
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh

check-generated: generate manifests proto asm ## Fail if the generated code, manifests, chart CRDs, gRPC code or assembly are stale
	@git diff --exit-code -- $(GENERATED_PATHS) || { echo "generated files are stale: run make generate manifests proto asm" >&2; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- $(GENERATED_PATHS)); \
		if [ -n "$$untracked" ]; then echo "untracked generated files: $$untracked" >&2; exit 1; fi

envtest: ## Build kube-apiserver and etcd for envtest into $(ENVTEST_ASSETS) and print the folder
	@hack/envtest.sh

vet-operator: ## gofmt and go vet the operator's packages
	@out=$$(gofmt -l main.go api controllers pkg/jobconfig pkg/jobstatus); \
		if [ -n "$$out" ]; then echo "gofmt needed: $$out" >&2; exit 1; fi
	go vet $(OPERATOR_PKGS)

test-operator: test-deps ## Run the operator's tests: builders, then the envtest suite on a real kube-apiserver and etcd
	KUBEBUILDER_ASSETS=$$(hack/envtest.sh -q) HELM=$(HELM) go test $(OPERATOR_PKGS)

helm-lint: helm ## helm lint and helm template the operator chart (offline)
	HELM=$(HELM) hack/helm-check.sh

build-operator: ## Run the go build commands the Dockerfile runs (both binaries, static)
	go build -ldflags="-s -w" -o bin/manager .
	go build -ldflags="-s -w" -o bin/dorylus ./runtime/dorylus

scale-test: ## 100 GNNTrainingJobs on envtest report progress once a second for a minute: print the operator's requests by verb and reconcile p99
	KUBEBUILDER_ASSETS=$$(hack/envtest.sh -q) DORYLUS_SCALE_TEST=1 go test ./controllers -run TestScaleProgress -count=1 -v -timeout 10m
