# Functions of cluster.sh, kept apart so the script reads top to bottom.
# Sourced, not run. They use $DIR (the state
# folder), $API_HOST and $API_PORT (the API server), and
# START_PATH (a folder put first on the PATH of what start runs, if set).

log() { echo "local-cluster: $*" >&2; }

# stop_pid NAME PID: SIGTERM, then SIGKILL after 10 s.
stop_pid() {
	local name=$1 pid=$2
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid"
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then log "$name ($pid) ignored SIGTERM: SIGKILL"; kill -KILL "$pid"; fi
	log "stopped $name ($pid)"
}

# stop NAME: stops the pid start recorded for NAME.
stop() {
	local f=$DIR/pids/$1
	[[ -f "$f" ]] || return 0
	stop_pid "$1" "$(cat "$f")"
	rm -f "$f"
}

# cert NAME CN [O] [SANs]: a key and a certificate signed by $DIR/pki/ca.
cert() {
	local name=$1 cn=$2 org=${3:-} san=${4:-}
	local subj="/CN=$cn"; [[ -n "$org" ]] && subj="/O=$org$subj"
	openssl req -new -newkey rsa:2048 -nodes -keyout "$DIR/pki/$name.key" -subj "$subj" -out "$DIR/pki/$name.csr" 2>/dev/null
	local ext=$DIR/pki/$name.ext
	echo "extendedKeyUsage=serverAuth,clientAuth" >"$ext"
	[[ -n "$san" ]] && echo "subjectAltName=$san" >>"$ext"
	openssl x509 -req -in "$DIR/pki/$name.csr" -CA "$DIR/pki/ca.crt" -CAkey "$DIR/pki/ca.key" -CAcreateserial \
		-days 30 -extfile "$ext" -out "$DIR/pki/$name.crt" 2>/dev/null
}

# kubeconfig NAME: $DIR/NAME.kubeconfig for client certificate NAME.
kubeconfig() {
	cat >"$DIR/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$API_HOST:$API_PORT", certificate-authority: "$DIR/pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$DIR/pki/$1.crt", client-key: "$DIR/pki/$1.key"}
contexts:
- name: local
  context: {cluster: local, user: $1}
current-context: local
KC
}

# start NAME CMD...: runs CMD in its own session, log in $DIR/logs/NAME.log,
# pid in $DIR/pids/NAME.
start() {
	local name=$1; shift
	PATH="${START_PATH:+$START_PATH:}$PATH" setsid "$@" >"$DIR/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$DIR/pids/$name"
	log "started $name (pid $!, log $DIR/logs/$name.log)"
}

# wait_for WHAT SECONDS CMD...: until CMD succeeds, or fails after SECONDS.
wait_for() {
	local what=$1 secs=$2; shift 2
	for _ in $(seq 1 $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	log "$what not up after ${secs}s; see $DIR/logs"; return 1
}

# start_controllers starts kube-controller-manager and kube-scheduler from
# $ASSETS with the $DIR/controller-manager and $DIR/scheduler kubeconfigs and
# the Service range $SERVICE_CIDR.
start_controllers() {
	start kube-controller-manager "$ASSETS/kube-controller-manager" --kubeconfig "$DIR/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$DIR/controller-manager.kubeconfig" --authorization-kubeconfig "$DIR/controller-manager.kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --controllers '*' --use-service-account-credentials \
		--service-account-private-key-file "$DIR/pki/sa.key" --root-ca-file "$DIR/pki/ca.crt" \
		--service-cluster-ip-range "$SERVICE_CIDR"
	start kube-scheduler "$ASSETS/kube-scheduler" --kubeconfig "$DIR/scheduler.kubeconfig" \
		--authentication-kubeconfig "$DIR/scheduler.kubeconfig" --authorization-kubeconfig "$DIR/scheduler.kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port 0
}
