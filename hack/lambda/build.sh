#!/usr/bin/env bash
# Builds `dorylus function` for AWS Lambda, for each architecture given (default: amd64 arm64):
#
#   OUT/dorylus-function-linux-ARCH.zip  for the provided.al2023 runtime: one executable,
#                                        bootstrap (dorylus, which serves as `dorylus function`
#                                        under that name)
#   OUT/dorylus-function-linux-ARCH.tar  a container image (OCI image layout, hack/image) whose
#                                        entrypoint is `/dorylus function`, named
#                                        REPOSITORY:TAG-ARCH
#
# OUT defaults to bin/lambda, REPOSITORY to dorylus-function, TAG to the chart's appVersion.
# Both files are the same bytes for the same commit and Go version: static binaries
# (CGO_ENABLED=0) built with -trimpath and no build id, fixed times in the zip and the image.
# hack/lambda/deploy.sh uploads them; README "Running on AWS Lambda" has the steps.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/bin/lambda}
repository=${REPOSITORY:-dorylus-function}
tag=${TAG:-$(awk '/^appVersion:/ {gsub(/"/, "", $2); print $2}' "$root/charts/dorylus-operator/Chart.yaml")}
arches=("$@")
if ((${#arches[@]} == 0)); then
	arches=(amd64 arm64)
fi
mkdir -p "$out"
cd "$root"
for arch in "${arches[@]}"; do
	case $arch in
	amd64 | arm64) ;;
	*)
		echo "build.sh: architecture $arch: want amd64 or arm64" >&2
		exit 1
		;;
	esac
	bin=$out/$arch/bootstrap
	# lambda.norpc: the provided runtimes need no net/rpc entry point of aws-lambda-go
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOFLAGS=-buildvcs=false \
		go build -trimpath -tags lambda.norpc -ldflags="-s -w -buildid=" -o "$bin" ./runtime/dorylus
	go run ./hack/lambda zip --out "$out/dorylus-function-linux-$arch.zip" "$bin"
	go run ./hack/image custom --name "$repository:$tag-$arch" --arch "$arch" \
		--add "$bin=/dorylus" --entrypoint /dorylus,function --out "$out/dorylus-function-linux-$arch.tar"
	echo "$out/dorylus-function-linux-$arch.zip $out/dorylus-function-linux-$arch.tar"
done
