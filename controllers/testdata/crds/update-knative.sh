#!/usr/bin/env bash
# Refreshes the Knative Serving CRDs that envtest installs (this folder's
# knative-serving-*.yaml) from the Go module knative.dev/serving at
# KNATIVE_VERSION (the one hack/local-cluster/knative.sh runs), through the
# module cache: go mod download fetches it when it is not there.
#
#   controllers/testdata/crds/update-knative.sh
set -euo pipefail

KNATIVE_VERSION=${KNATIVE_VERSION:-v0.51.0}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=$(cd "$(mktemp -d)" && go mod download -json "knative.dev/serving@$KNATIVE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -d "$mod/config/core/300-resources" ]] || { echo "knative.dev/serving@$KNATIVE_VERSION has no config/core/300-resources" >&2; exit 1; }
# The operator writes Services only; Knative's controller makes the rest.
for crd in service; do
	{
		echo "# Knative Serving's $crd CRD, unmodified from the Go module"
		echo "# knative.dev/serving@$KNATIVE_VERSION, config/core/300-resources/$crd.yaml."
		echo "# Written by controllers/testdata/crds/update-knative.sh: do not edit."
		cat "$mod/config/core/300-resources/$crd.yaml"
	} >"$HERE/knative-serving-$crd.yaml"
done
