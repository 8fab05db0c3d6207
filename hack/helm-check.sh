#!/usr/bin/env bash
# Lints and renders the operator chart offline, with helm's homes in a temp
# folder: the default values, a variant exercising every optional block, and
# values the schema must refuse. Usage: HELM=path/to/helm hack/helm-check.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELM=${HELM:-$HOME/.cache/dorylus/bin/helm}
KUBE_VERSION=${KUBE_VERSION:-1.37.2}
chart="$ROOT/charts/dorylus-operator"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HELM_CACHE_HOME="$tmp/cache" HELM_CONFIG_HOME="$tmp/config" HELM_DATA_HOME="$tmp/data"

cat > "$tmp/full.yaml" <<'VALUES'
replicaCount: 2
image: {repository: example.internal/dorylus, tag: v9, pullPolicy: Always}
imagePullSecrets: [{name: regcred}]
runtimeImage: {repository: example.internal/dorylus-runtime, tag: v9}
metrics: {enabled: true, secure: true, port: 9443, service: {type: ClusterIP, port: 9443, annotations: {prometheus.io/scrape: "true"}}}
serviceAccount: {create: true, name: dorylus, annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/x"}}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: control, effect: NoSchedule}]
affinity: {nodeAffinity: {}}
podAnnotations: {a: b}
podLabels: {team: ml}
priorityClassName: system-cluster-critical
logLevel: debug
watchNamespaces: [ml, research]
networkPolicy: {metricsScraperNamespaces: "kubernetes.io/metadata.name=prometheus"}
VALUES

"$HELM" lint --strict --kube-version "$KUBE_VERSION" "$chart"
"$HELM" lint --strict --kube-version "$KUBE_VERSION" -f "$tmp/full.yaml" "$chart"
"$HELM" template dorylus "$chart" --namespace dorylus-system --kube-version "$KUBE_VERSION" > "$tmp/default.yaml"
"$HELM" template dorylus "$chart" --namespace dorylus-system --kube-version "$KUBE_VERSION" -f "$tmp/full.yaml" > "$tmp/full-out.yaml"
"$HELM" template dorylus "$chart" --namespace dorylus-system --kube-version "$KUBE_VERSION" \
	--set metrics.enabled=false --set leaderElection.enabled=false --set crds.install=false > "$tmp/minimal.yaml"
if grep -q CustomResourceDefinition "$tmp/minimal.yaml"; then
	echo "helm-check: crds.install=false still renders the CRD" >&2; exit 1
fi
for bad in "replicaCount=0" "metrics.port=70000" "logLevel=loud" "image.pullPolicy=Sometimes" "unknownKey=1" "watchNamespaces={Bad_NS}"; do
	if "$HELM" template dorylus "$chart" --kube-version "$KUBE_VERSION" --set "$bad" >/dev/null 2>&1; then
		echo "helm-check: values.schema.json accepted $bad" >&2; exit 1
	fi
done
echo "helm-check: lint and template passed; $(grep -c '^kind:' "$tmp/default.yaml") objects rendered with default values"
