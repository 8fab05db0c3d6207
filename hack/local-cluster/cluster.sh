#!/usr/bin/env bash
# Starts (up) or stops (down) a one-machine Kubernetes cluster on loopback:
# etcd, kube-apiserver (client-certificate authn, Node+RBAC authz, bound
# ServiceAccount tokens), kube-controller-manager, kube-scheduler and the
# process node agent (test/nodeagent), which runs pods as OS processes. It must
# run as root (the agent creates network namespaces and mounts).
#
#   hack/local-cluster/cluster.sh up     # prints the admin kubeconfig path
#   hack/local-cluster/cluster.sh down   # stops exactly the pids up recorded
#
# State (certificates, etcd data, logs, pids, pod folders) lives in
# $LOCAL_CLUSTER_DIR (default ~/.cache/dorylus/local-cluster, outside /tmp,
# which pods get as an emptyDir); the admin kubeconfig is $LOCAL_CLUSTER_DIR/kubeconfig.
# Images: $IMAGE_DIR (default bin/) must hold the binaries the image
# dorylus-gnn/dorylus runs: manager and dorylus (make build-operator);
# $NODEAGENT is the agent binary (default bin/nodeagent).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${LOCAL_CLUSTER_DIR:-$HOME/.cache/dorylus/local-cluster}
IMAGE_DIR=${IMAGE_DIR:-$ROOT/bin}
NODEAGENT=${NODEAGENT:-$ROOT/bin/nodeagent}
ETCD_PORT=${ETCD_PORT:-23790}
API_PORT=${API_PORT:-16443}
POD_CIDR=${POD_CIDR:-10.213.0.0/24}
GATEWAY=${POD_CIDR%.*}.1
SERVICE_CIDR=${SERVICE_CIDR:-10.214.0.0/24}
SERVICE_IP=${SERVICE_CIDR%.*}.1
NODE=${NODE_NAME:-dorylus-local}
KUBECONFIG_OUT=$DIR/kubeconfig

API_HOST=127.0.0.1
# shellcheck source=hack/local-cluster/lib.sh
source "$ROOT/hack/local-cluster/lib.sh"

down() {
	[[ -d "$DIR/pids" ]] || { log "nothing recorded in $DIR/pids"; return 0; }
	# The agent first: it stops the pods' processes and removes their namespaces.
	for name in nodeagent kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$name"; done
}

up() {
	[[ $EUID -eq 0 ]] || { log "must run as root (network namespaces, mounts)"; exit 1; }
	ASSETS=$("$ROOT/hack/envtest.sh" -q)
	"$ROOT/hack/local-cluster/build.sh" -q >/dev/null
	for b in "$IMAGE_DIR/manager" "$IMAGE_DIR/dorylus" "$NODEAGENT"; do
		[[ -x "$b" ]] || { log "$b missing: make build-operator and go build -o bin/nodeagent ./test/nodeagent"; exit 1; }
	done
	down
	rm -rf "$DIR/etcd" "$DIR/state"
	mkdir -p "$DIR/pki" "$DIR/logs" "$DIR/pids" "$DIR/state"
	if [[ ! -f "$DIR/pki/ca.crt" ]]; then
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$DIR/pki/ca.key" -subj "/CN=dorylus-local-ca" -days 30 -out "$DIR/pki/ca.crt" 2>/dev/null
		openssl genrsa -out "$DIR/pki/sa.key" 2048 2>/dev/null
		openssl rsa -in "$DIR/pki/sa.key" -pubout -out "$DIR/pki/sa.pub" 2>/dev/null
		cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:$GATEWAY,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
		cert admin admin system:masters
		cert controller-manager system:kube-controller-manager
		cert scheduler system:kube-scheduler
		cert nodeagent "system:node:$NODE" system:nodes
	fi
	for n in admin controller-manager scheduler nodeagent; do kubeconfig "$n"; done
	cp "$DIR/admin.kubeconfig" "$KUBECONFIG_OUT"

	start etcd "$ASSETS/etcd" --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-cluster "default=http://127.0.0.1:$((ETCD_PORT + 1))" \
		--unsafe-no-fsync
	start kube-apiserver "$ASSETS/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
		--tls-cert-file "$DIR/pki/apiserver.crt" --tls-private-key-file "$DIR/pki/apiserver.key" \
		--client-ca-file "$DIR/pki/ca.crt" --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--service-account-issuer https://kubernetes.default.svc.cluster.local --api-audiences https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$DIR/pki/sa.pub" --service-account-signing-key-file "$DIR/pki/sa.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged --endpoint-reconciler-type none
	wait_for kube-apiserver 120 "$ASSETS/kubectl" --kubeconfig "$KUBECONFIG_OUT" get --raw /readyz
	# The agent lists EndpointSlices for its hosts files, as kube-proxy does.
	"$ASSETS/kubectl" --kubeconfig "$KUBECONFIG_OUT" create clusterrolebinding dorylus-local-node-proxier \
		--clusterrole system:node-proxier --user "system:node:$NODE" >/dev/null
	start_controllers
	start nodeagent "$NODEAGENT" --kubeconfig "$DIR/nodeagent.kubeconfig" --node-name "$NODE" \
		--state-dir "$DIR/state" --image "dorylus-gnn/dorylus=$IMAGE_DIR" --pod-cidr "$POD_CIDR" \
		--apiserver "127.0.0.1:$API_PORT"
	wait_for "Node $NODE Ready" 120 "$ASSETS/kubectl" --kubeconfig "$KUBECONFIG_OUT" wait --for=condition=Ready "node/$NODE" --timeout 1s
	wait_for "ConfigMap default/kube-root-ca.crt" 120 "$ASSETS/kubectl" --kubeconfig "$KUBECONFIG_OUT" get configmap kube-root-ca.crt
	echo "$KUBECONFIG_OUT"
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
