#!/usr/bin/env bash
# Installs (up) or removes (down) Kueue on the local cluster that
# cluster.sh up started. up builds the Kueue manager from its own Go module
# at the version hack/tools.sh pins (never from ours: it pins other k8s.io
# releases), packs it as the image $KUEUE_IMAGE (hack/image) and imports it
# into the node, renders the module's config/default with the overlay in
# hack/kueue (kubectl kustomize), applies it server-side, and waits until the
# manager is available and its webhooks answer. down deletes what up applied.
# Run it before the operator starts: the operator discovers Kueue at start.
#
#   hack/local-cluster/kueue.sh up | down
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${LOCAL_CLUSTER_DIR:-$HOME/.cache/dorylus/local-cluster}
WORK=$DIR/kueue
KUEUE_IMAGE=docker.io/dorylus-gnn/kueue:local # the name hack/kueue/manager.yaml runs
log() { echo "kueue: $*" >&2; }
[[ -f "$DIR/assets" && -f "$DIR/kubeconfig" ]] || { log "no local cluster in $DIR: run hack/local-cluster/cluster.sh up"; exit 1; }
ASSETS=$(cat "$DIR/assets")
kubectl() { "$ASSETS/kubectl" --kubeconfig "$DIR/kubeconfig" "$@"; }

# render writes $WORK/kueue.yaml and $WORK/kueue-image.tar.
render() {
	local bin version mod
	bin=$("$ROOT/hack/tools.sh" kueue)/kueue
	version=$(go version -m "$bin" | awk '$1 == "mod" {print $3}')
	mod=$(cd "$(mktemp -d)" && go mod download -json "sigs.k8s.io/kueue@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[[ -d "$mod/config/default" ]] || { log "sigs.k8s.io/kueue@$version has no config/default in the module cache"; exit 1; }
	rm -rf "$WORK" && mkdir -p "$WORK"
	cp -r "$ROOT/hack/kueue/." "$WORK/"
	cp -r "$mod/config" "$WORK/upstream" && chmod -R u+w "$WORK/upstream"
	kubectl kustomize "$WORK" >"$WORK/kueue.yaml"
	(cd "$ROOT" && go run ./hack/image custom --name "$KUEUE_IMAGE" --add "$bin=/manager" --entrypoint /manager --out "$WORK/kueue-image.tar")
	log "rendered Kueue $version"
}

up() {
	local t0=$SECONDS
	render
	"$ROOT/hack/local-cluster/cluster.sh" import "$WORK/kueue-image.tar"
	kubectl apply --server-side --force-conflicts -f "$WORK/kueue.yaml" >/dev/null
	kubectl -n kueue-system rollout status deployment/kueue-controller-manager --timeout 300s >&2
	# Ready means its certificates are in place; the webhooks answer once the
	# API server reaches them: a server-side dry run goes through them.
	for _ in $(seq 1 150); do
		if kubectl create --dry-run=server -f - >/dev/null 2>&1 <<-RF; then
			apiVersion: kueue.x-k8s.io/v1beta2
			kind: ResourceFlavor
			metadata: {name: kueue-sh-probe}
		RF
			log "up in $((SECONDS - t0)) s"
			return 0
		fi
		sleep 2
	done
	log "Kueue's webhooks do not answer after 300 s"
	kubectl -n kueue-system logs deployment/kueue-controller-manager --tail 50 >&2 || true
	exit 1
}

down() {
	[[ -f "$WORK/kueue.yaml" ]] || { log "nothing applied ($WORK/kueue.yaml missing)"; return 0; }
	kubectl delete --ignore-not-found --wait=false -f "$WORK/kueue.yaml" >/dev/null
	log "deleted"
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up | down" >&2; exit 2 ;;
esac
