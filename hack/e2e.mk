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
