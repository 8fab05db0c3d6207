#!/usr/bin/env bash
# Starts (up) or stops (down) a real one-node Kubernetes cluster on this
# machine: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# containerd (with Debian's runc and CNI plugins), kubelet, kube-proxy
# (iptables), CoreDNS as a pod, and kube-router's firewall, which enforces
# NetworkPolicy (iptables + ipset; its routing and service proxy off;
# NETWORK_POLICY=none leaves it out). The node's address is on a bridge this
# script creates ($BRIDGE, $NODE_CIDR); pods get addresses from the same /24.
# It must run as root.
#
#   hack/local-cluster/cluster.sh up [IMAGE.tar...]  # prints the admin kubeconfig path
#   hack/local-cluster/cluster.sh import IMAGE.tar... # ctr -n k8s.io images import
#   hack/local-cluster/cluster.sh down                # undoes everything up did
#
# up imports the pause and CoreDNS images it builds and every IMAGE.tar given
# (the runtime image: make local-cluster; make e2e imports the Lambda emulator's
# too), and creates $HOST_VOLUMES/models for hostPath volumes. down stops exactly the pids up recorded
# (and the containerd shims of its pods), unmounts what lies under the state
# folder, deletes the bridge, restores the sysctls and the netfilter ruleset
# recorded before up, destroys the ipsets kube-router made (those not there
# before up), and removes the host folders up created.
#
# State (certificates, etcd data, containerd root, kubelet root, logs, pids)
# lives in $LOCAL_CLUSTER_DIR (default ~/.cache/dorylus/local-cluster); the
# admin kubeconfig is $LOCAL_CLUSTER_DIR/kubeconfig.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${LOCAL_CLUSTER_DIR:-$HOME/.cache/dorylus/local-cluster}
ETCD_PORT=${ETCD_PORT:-23790}
API_PORT=${API_PORT:-16443}
KUBELET_PORT=${KUBELET_PORT:-20250}
BRIDGE=${BRIDGE:-dorylus0}
NODE_CIDR=${NODE_CIDR:-10.213.0.0/24}
NODE_IP=${NODE_CIDR%.*}.1
SERVICE_CIDR=${SERVICE_CIDR:-10.214.0.0/24}
SERVICE_IP=${SERVICE_CIDR%.*}.1
DNS_IP=${SERVICE_CIDR%.*}.10
NODE=${NODE_NAME:-dorylus-local}
# The NetworkPolicy enforcer: kube-router (its firewall only), or none.
NETWORK_POLICY=${NETWORK_POLICY:-kube-router}
CGROUP_ROOT=/dorylus-local
SOCK=$DIR/containerd/containerd.sock
KUBECONFIG_OUT=$DIR/kubeconfig
PAUSE_IMAGE=docker.io/dorylus-gnn/pause:local
COREDNS_IMAGE=docker.io/dorylus-gnn/coredns:local
SYSCTLS=(kernel.panic kernel.panic_on_oops vm.overcommit_memory net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables)
# The node's folder for hostPath volumes, owned by the pods' user: the PersistentVolume of
# config/samples/volumes/models.yaml (the README's quick start) names it.
HOST_VOLUMES=/var/lib/dorylus-local
HOST_DIRS=(/var/lib/kubelet /var/lib/cni /run/containerd /etc/cni /opt/cni "$HOST_VOLUMES")

API_HOST=$NODE_IP
ASSETS=${ASSETS:-}
# shellcheck source=hack/local-cluster/lib.sh
source "$ROOT/hack/local-cluster/lib.sh"

kubectl() { "$ASSETS/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }
ctr() { "$ASSETS/ctr" --address "$SOCK" -n k8s.io "$@"; }

down() {
	[[ -d "$DIR/pids" ]] || { log "nothing recorded in $DIR/pids"; return 0; }
	ASSETS=$(cat "$DIR/assets" 2>/dev/null || true)
	# The kubelet first, so that it restarts nothing; then every container
	# of the node, through containerd, and the shims that ran them.
	stop kubelet
	if [[ -f "$DIR/pids/containerd" && -n "$ASSETS" ]] && kill -0 "$(cat "$DIR/pids/containerd")" 2>/dev/null; then
		for id in $(ctr tasks ls -q 2>/dev/null); do ctr tasks kill -s KILL "$id" >/dev/null 2>&1 || true; done
		sleep 0.5
		for id in $(ctr tasks ls -q 2>/dev/null); do ctr tasks delete -f "$id" >/dev/null 2>&1 || true; done
	fi
	for f in "$DIR"/containerd/state/io.containerd.runtime.v2.task/k8s.io/*/shim.pid; do
		[[ -f "$f" ]] && stop_pid containerd-shim "$(cat "$f")"
	done
	for name in kube-router kube-proxy coredns kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do stop "$name"; done
	# Kubelet volumes, pod network namespaces and containerd's overlay
	# mounts, deepest first.
	awk -v d="$DIR/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" || log "cannot unmount $m"
	done
	if [[ -n "$ASSETS" && -x "$ASSETS/kube-proxy" ]]; then "$ASSETS/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
	if [[ -f "$DIR/host/nft.before" ]]; then
		nft flush ruleset && nft -f "$DIR/host/nft.before" && log "restored the netfilter ruleset"
		rm -f "$DIR/host/nft.before"
	fi
	# kube-router's ipsets (KUBE-SRC-…, KUBE-DST-…, TMP-… while it restores,
	# inet6:… for IPv6) that were not there before up; its rules that held
	# them went with the ruleset above.
	if [[ -f "$DIR/host/ipsets.before" ]]; then
		for set in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?(KUBE-|TMP-)' | grep -vxFf "$DIR/host/ipsets.before"); do
			ipset destroy "$set" || log "cannot destroy ipset $set"
		done
		rm -f "$DIR/host/ipsets.before"
		log "destroyed kube-router's ipsets"
	fi
	for link in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link delete "$link" || true; done
	if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link delete "$BRIDGE" && log "deleted bridge $BRIDGE"; fi
	if [[ -f "$DIR/host/sysctls" ]]; then
		while read -r k v; do sysctl -qw "$k=$v" || log "cannot restore $k=$v"; done <"$DIR/host/sysctls"
		rm -f "$DIR/host/sysctls"
		log "restored sysctls"
	fi
	for c in /sys/fs/cgroup/*"$CGROUP_ROOT"; do
		[[ -d "$c" ]] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	if [[ -f "$DIR/host/created" ]]; then
		while read -r d; do rm -rf "$d"; done <"$DIR/host/created"
		rm -f "$DIR/host/created"
	fi
}

# images builds the pause and CoreDNS images (static binaries, hack/image).
images() {
	local b=$DIR/images
	mkdir -p "$b"
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -buildid=" -o "$b/pause" ./hack/local-cluster/pause &&
		go run ./hack/image custom --name "$PAUSE_IMAGE" --add "$b/pause=/pause" --entrypoint /pause --out "$b/pause.tar" &&
		go run ./hack/image custom --name "$COREDNS_IMAGE" --add "$ASSETS/coredns=/coredns" --entrypoint /coredns --out "$b/coredns.tar")
}

import() {
	for tar in "$@"; do
		ctr images import "$tar" >/dev/null
		log "imported $tar"
	done
}

host_setup() {
	mkdir -p "$DIR/host"
	: >"$DIR/host/created"
	for d in "${HOST_DIRS[@]}"; do [[ -e "$d" ]] || echo "$d" >>"$DIR/host/created"; done
	for k in "${SYSCTLS[@]}"; do echo "$k $(sysctl -n "$k")"; done >"$DIR/host/sysctls"
	nft list ruleset >"$DIR/host/nft.before"
	# An empty line keeps grep -vxFf from matching every set when there was none.
	{ echo; ipset list -n; } >"$DIR/host/ipsets.before"
	sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
	install -d -o 65532 -g 65532 "$HOST_VOLUMES/models"
	ip link add "$BRIDGE" type bridge
	ip addr add "$NODE_IP/${NODE_CIDR#*/}" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	mkdir -p "$DIR/cni/net.d" "$DIR/cni/ipam"
	cat >"$DIR/cni/net.d/10-dorylus.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "dorylus",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$DIR/cni/ipam", "ranges": [[{"subnet": "$NODE_CIDR", "rangeStart": "${NODE_CIDR%.*}.10", "gateway": "$NODE_IP"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
}

containerd_config() {
	mkdir -p "$DIR/containerd"
	cat >"$DIR/containerd/config.toml" <<TOML
version = 3
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '$PAUSE_IMAGE'

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = '$(command -v runc)'
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = '$DIR/cni/net.d'
TOML
}

kubelet_config() {
	: >"$DIR/resolv.conf"
	cat >"$DIR/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((KUBELET_PORT - 2))
tlsCertFile: $DIR/pki/kubelet.crt
tlsPrivateKeyFile: $DIR/pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $DIR/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
failCgroupV1: false
failSwapOn: false
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
resolvConf: $DIR/resolv.conf
volumePluginDir: $DIR/kubelet-plugins
podLogsDir: $DIR/pod-logs
podCIDR: $NODE_CIDR
maxPods: 60
serializeImagePulls: false
# The kubelet refreshes a running pod's Secret volumes when it syncs the pod,
# every syncFrequency (default 1m, jittered up to half as much again):
# Kueue's manager is not ready until the certificates it writes into its own
# Secret appear in its volume, which took up to 104 s of kueue.sh up's 139.
syncFrequency: 10s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
YAML
}

# addons: CoreDNS (a Deployment and the Service at $DNS_IP) and the RBAC
# kube-proxy, kube-router and CoreDNS need.
addons() {
	kubectl create clusterrolebinding dorylus-local-node-proxier --clusterrole system:node-proxier --user system:kube-proxy >/dev/null
	kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: dorylus-local:kube-router}
rules:
- apiGroups: [""]
  resources: [pods, namespaces, nodes, services, endpoints]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dorylus-local:kube-router}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: dorylus-local:kube-router}
subjects:
- {kind: User, name: "dorylus-local:kube-router", apiGroup: rbac.authorization.k8s.io}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: dorylus-local:coredns}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dorylus-local:coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: dorylus-local:coredns}
subjects:
- {kind: ServiceAccount, name: coredns, namespace: kube-system}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:1053 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 5
        loop
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports: [{containerPort: 1053, protocol: UDP, name: dns}, {containerPort: 1053, protocol: TCP, name: dns-tcp}]
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        resources: {requests: {cpu: 50m, memory: 32Mi}, limits: {memory: 128Mi}}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $DNS_IP
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
YAML
}

up() {
	[[ $EUID -eq 0 ]] || { log "must run as root (bridge, mounts, cgroups)"; exit 1; }
	local t0=$SECONDS
	case $NETWORK_POLICY in kube-router | none) ;; *) log "NETWORK_POLICY=$NETWORK_POLICY: kube-router or none"; exit 2 ;; esac
	for need in runc nft iptables ip openssl ipset; do
		command -v "$need" >/dev/null || { log "$need missing: run hack/local-cluster/deps.sh"; exit 1; }
	done
	[[ -x /usr/lib/cni/bridge ]] || { log "CNI plugins missing in /usr/lib/cni: run hack/local-cluster/deps.sh"; exit 1; }
	"$ROOT/hack/envtest.sh" -q >/dev/null
	ASSETS=$("$ROOT/hack/local-cluster/build.sh" -q)
	START_PATH=$ASSETS
	for b in "$@"; do [[ -f "$b" ]] || { log "$b missing (make image)"; exit 1; }; done
	down
	ip link show "$BRIDGE" >/dev/null 2>&1 && { log "$BRIDGE exists and was not made by this script"; exit 1; }
	rm -rf "$DIR/etcd" "$DIR/containerd" "$DIR/kubelet" "$DIR/cni" "$DIR/logs" "$DIR/kubelet-plugins" "$DIR/pod-logs"
	mkdir -p "$DIR/pki" "$DIR/logs" "$DIR/pids" "$DIR/kubelet"
	echo "$ASSETS" >"$DIR/assets"
	images
	if [[ ! -f "$DIR/pki/ca.crt" || ! -f "$DIR/pki/kubelet.crt" || ! -f "$DIR/pki/kube-router.crt" ]] || ! openssl x509 -in "$DIR/pki/apiserver.crt" -noout -text | grep -q "IP Address:$NODE_IP"; then
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$DIR/pki/ca.key" -subj "/CN=dorylus-local-ca" -days 30 -out "$DIR/pki/ca.crt" 2>/dev/null
		openssl genrsa -out "$DIR/pki/sa.key" 2048 2>/dev/null
		openssl rsa -in "$DIR/pki/sa.key" -pubout -out "$DIR/pki/sa.pub" 2>/dev/null
		cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
		cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
		cert admin admin system:masters
		cert controller-manager system:kube-controller-manager
		cert scheduler system:kube-scheduler
		cert node "system:node:$NODE" system:nodes
		cert kube-proxy system:kube-proxy
		cert kube-router dorylus-local:kube-router
		cert kubelet "$NODE" "" "IP:$NODE_IP,DNS:$NODE"
	fi
	for n in admin controller-manager scheduler node kube-proxy kube-router; do kubeconfig "$n"; done
	cp "$DIR/admin.kubeconfig" "$KUBECONFIG_OUT"
	host_setup
	containerd_config
	kubelet_config

	start containerd "$ASSETS/containerd" --config "$DIR/containerd/config.toml"
	start etcd "$ASSETS/etcd" --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-cluster "default=http://127.0.0.1:$((ETCD_PORT + 1))" \
		--unsafe-no-fsync
	start kube-apiserver "$ASSETS/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
		--tls-cert-file "$DIR/pki/apiserver.crt" --tls-private-key-file "$DIR/pki/apiserver.key" \
		--client-ca-file "$DIR/pki/ca.crt" --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--kubelet-client-certificate "$DIR/pki/apiserver-kubelet-client.crt" --kubelet-client-key "$DIR/pki/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$DIR/pki/ca.crt" --kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc.cluster.local --api-audiences https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$DIR/pki/sa.pub" --service-account-signing-key-file "$DIR/pki/sa.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged
	wait_for containerd 60 "$ASSETS/ctr" --address "$SOCK" version
	import "$DIR/images/pause.tar" "$DIR/images/coredns.tar" "$@"
	wait_for kube-apiserver 120 kubectl get --raw /readyz
	start_controllers
	# kubelet's cgroupfs driver wants its cgroupRoot in every cgroup v1 hierarchy (down removes them)
	for c in /sys/fs/cgroup/*/; do
		if [[ -f "$c/cgroup.procs" ]]; then mkdir -p "$c${CGROUP_ROOT#/}"; fi
	done
	start kubelet "$ASSETS/kubelet" --config "$DIR/kubelet.yaml" --kubeconfig "$DIR/node.kubeconfig" \
		--root-dir "$DIR/kubelet" --cert-dir "$DIR/kubelet/pki" --node-ip "$NODE_IP" --hostname-override "$NODE" --v=1
	addons
	start kube-proxy "$ASSETS/kube-proxy" --kubeconfig "$DIR/kube-proxy.kubeconfig" --hostname-override "$NODE" \
		--proxy-mode iptables --cluster-cidr "$NODE_CIDR" --bind-address "$NODE_IP" \
		--metrics-bind-address 127.0.0.1:$((KUBELET_PORT + 1)) --healthz-bind-address 127.0.0.1:$((KUBELET_PORT + 6)) \
		--conntrack-max-per-core 0 --iptables-localhost-nodeports=false
	if [[ "$NETWORK_POLICY" == kube-router ]]; then
		# Its firewall alone: the bridge CNI routes and kube-proxy serves
		# Services. No health or metrics port; its filter chains are the
		# sign that it runs (it admits the node's own traffic to the pods:
		# the kubelet's probes).
		start kube-router "$ASSETS/kube-router" --kubeconfig "$DIR/kube-router.kubeconfig" --hostname-override "$NODE" \
			--run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
			--service-cluster-ip-range "$SERVICE_CIDR" --health-port 0 --metrics-port 0
	fi
	wait_for "Node $NODE Ready" 120 kubectl wait --for=condition=Ready "node/$NODE" --timeout 1s
	wait_for "ConfigMap default/kube-root-ca.crt" 120 kubectl get configmap kube-root-ca.crt
	wait_for "CoreDNS" 120 kubectl -n kube-system wait --for=condition=Available deployment/coredns --timeout 1s
	if [[ "$NETWORK_POLICY" == kube-router ]]; then wait_for kube-router 60 iptables -S KUBE-ROUTER-FORWARD; fi
	log "up in $((SECONDS - t0)) s"
	echo "$KUBECONFIG_OUT"
}

case "${1:-}" in
up) shift; up "$@" ;;
import)
	shift
	ASSETS=$(cat "$DIR/assets")
	import "$@"
	;;
down) down ;;
*) echo "usage: $0 up [IMAGE.tar...] | import IMAGE.tar... | down" >&2; exit 2 ;;
esac
