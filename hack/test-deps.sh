#!/usr/bin/env bash
# Installs every component `make test` runs against, so that no test finds one missing (a test
# never skips for a missing component: it fails naming this script): helm, the AWS Lambda
# runtime interface emulator, MinIO and the Kueue manager (hack/tools.sh, built from Go modules
# into ~/.cache/dorylus/bin), kube-apiserver and etcd for envtest (hack/envtest.sh), and Debian's
# python3-torch and python3-numpy for the check that PyTorch reproduces exported models, and
# metis (gpmetis, the yardstick of pkg/partition's cut), and qemu-user-static (make test-arm64).
# .ci/run and make test both run it; what is present at the pinned version is kept, so a warm
# run takes seconds. Cold, on 2 cores: about 11 minutes for the tools and 10 for envtest.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/tools.sh helm aws-lambda-rie minio kueue >/dev/null
hack/envtest.sh -q >/dev/null
python=${DORYLUS_PYTHON:-/usr/bin/python3}
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
	install="apt-get update && apt-get install -y python3-torch python3-numpy"
	if [[ $(id -u) -ne 0 ]]; then
		echo "test-deps: $python has no torch and numpy; as root: $install (or set DORYLUS_PYTHON to a python3 that has them)" >&2
		exit 1
	fi
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-numpy
fi
command -v gpmetis >/dev/null || { [[ $(id -u) -eq 0 ]] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq metis; } || { echo "test-deps: no gpmetis; as root: apt-get install -y metis" >&2; exit 1; }
command -v qemu-aarch64-static >/dev/null || { [[ $(id -u) -eq 0 ]] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static; } || { echo "test-deps: no qemu-aarch64-static (make test-arm64); as root: apt-get install -y qemu-user-static" >&2; exit 1; }
echo "test-deps: every component the tests run against is installed" >&2
