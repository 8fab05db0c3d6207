#!/usr/bin/env bash
# Runs every Go fuzz target of the data plane (each `func FuzzX` in a _test.go file under pkg/,
# runtime/ and internal/), one after the other, for a given time each.
# Usage: hack/fuzz.sh [TIME]   (TIME as go test -fuzztime takes it; default 10s)
# FUZZ_PARALLEL sets the fuzzing workers (default 2), FUZZ_MEMORY_KB the virtual memory a
# fuzzing process may reserve (default 8 GiB), so that an allocation sized by a hostile number
# fails the target instead of taking the machine's memory, and FUZZ_MINIMIZE how long each new
# input is minimised (default 100x, 100 runs: go's default of 60 s spent a whole minute of a
# target that serves gRPC, such as FuzzGraphServer, minimising its first new input).
# Each package's test binary is built once, instrumented for fuzzing, and run for each of its
# targets in the package's folder as go test would run it (the same cache of interesting inputs,
# failing inputs written to its testdata/fuzz): a go test -fuzz per target linked the binary again
# each time, a quarter of CI's fuzzing step.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-10s}
parallel=${FUZZ_PARALLEL:-2}
ulimit -v "${FUZZ_MEMORY_KB:-8388608}"

mapfile -t targets < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' pkg runtime internal |
	sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)$#\1 \2#' | sort -u)
if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
# Go 1.26's fuzzing coordinator may fail a target with a bare "context deadline exceeded" as
# -fuzztime ends, having written no input (golang/go#75804, fixed in Go 1.27). Such a run says
# nothing about the target: it is noted and the target fuzzed again, up to three times. A run
# that wrote a failing input, or failed otherwise, fails.
out=$(mktemp)
bins=$(mktemp -d)
trap 'rm -rf "$out" "$bins"' EXIT
module=$(go list -m)
cache=$(go env GOCACHE)/fuzz
inputs() { if [[ -d $1 ]]; then find "$1" -type f | wc -l; else echo 0; fi; }
# fuzz runs one target once, its output in $out; 0: passed, 2: the coordinator's race, 1: failed.
fuzz() {
	local dir=$1 name=$2 corpus=$1/testdata/fuzz/$2 before
	before=$(inputs "$corpus")
	local bin=$bins/${dir//\//_}.test
	if [[ ! -x $bin ]] && ! go test -c -o "$bin" -fuzz . "./$dir" >"$out" 2>&1; then
		return 1
	fi
	if (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${name}\$" -test.fuzztime "$time" -test.fuzzminimizetime "${FUZZ_MINIMIZE:-100x}" \
		-test.parallel "$parallel" -test.fuzzcachedir "$cache/$module/$dir") >"$out" 2>&1; then
		return 0
	fi
	if [[ $(inputs "$corpus") -eq $before ]] && grep -qE '^[[:space:]]*context deadline exceeded$' "$out"; then
		return 2
	fi
	return 1
}
failed=()
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	echo "fuzz: ./$dir $name for $time"
	for try in 1 2 3; do
		rc=0
		fuzz "$dir" "$name" || rc=$?
		[[ $rc -eq 2 && $try -lt 3 ]] || break
		echo "fuzz: $name: the fuzzing coordinator's deadline race (golang/go#75804), no input written: fuzzing it again"
	done
	cat "$out"
	[[ $rc -eq 0 ]] || failed+=("./$dir $name")
done
if [[ ${#failed[@]} -gt 0 ]]; then
	printf 'fuzz: failed: %s\n' "${failed[@]}" >&2
	echo "fuzz: each failing input is under the package's testdata/fuzz; keep it there as a regression seed once fixed" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} targets passed"
