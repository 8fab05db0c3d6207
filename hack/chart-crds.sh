#!/usr/bin/env bash
# Copies the controller-gen CRDs from config/crd/bases into the Helm chart's
# templates, wrapped in a flag and given helm.sh/resource-policy: keep so that
# `helm uninstall` never deletes users' jobs. CRDs live under templates/ (not
# crds/) so that `helm upgrade` updates them.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$ROOT/charts/dorylus-operator/templates/crds"
mkdir -p "$out"
for f in "$ROOT"/config/crd/bases/*.yaml; do
	name=$(basename "$f")
	{
		echo "{{- if .Values.crds.install }}"
		# Insert the keep annotation next to controller-gen's own annotation.
		awk '
			/^  annotations:$/ && !done { print; print "    helm.sh/resource-policy: keep"; done=1; next }
			{ print }
		' "$f" | sed '/^---$/d'
		echo "{{- end }}"
	} > "$out/$name"
done
