#!/usr/bin/env bash
# Trains Cora through AWS Lambda runtime interface emulators (hack/lambda-emulators.sh) on 2
# graph servers with staleness 1, against synchronous training on the cpu backend, then measures
# stragglers: the same lambda run with one call in ten delayed to DELAY_FACTOR× the mean call
# time (the function's delay fault), with the default straggler rule and with RELAUNCH (extra
# flags, e.g. a lower floor), the runs interleaved ROUNDS times so that load on the machine hits
# them alike. Prints accuracy, median epoch time, mean call time, calls and the cost estimate.
#
#   hack/bench/lambda.sh [ROUNDS] [EPOCHS] [DELAY_FACTOR] [RELAUNCH]
#
# Defaults: 3 rounds, 60 epochs (the accuracy runs train 200), a 10× delay, RELAUNCH
# "--straggler-floor 20ms --straggler-factor 3". 4 emulators per graph server for 2 intervals:
# spare ones take the relaunches.
set -euo pipefail
rounds=${1:-3}
epochs=${2:-60}
factor=${3:-10}
relaunch=${4:---straggler-floor 20ms --straggler-factor 3}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
go build -o bin/dorylus ./runtime/dorylus
export AWS_ACCESS_KEY_ID=emulator AWS_SECRET_ACCESS_KEY=emulator AWS_EC2_METADATA_DISABLED=true
out=$(mktemp -d)
trap 'hack/lambda-emulators.sh down "$out/plain"; hack/lambda-emulators.sh down "$out/slow"; rm -rf "$out"' EXIT
train=(bin/dorylus train --graph-servers 2 --intervals 2 --output json)
# --placement remote: every tensor task is a call (auto would run the cheap ones in the graph
# servers), since this benchmarks the function path.
lambda=(--backend lambda --lambda-function function --lambda-region us-east-1 --endpoint-concurrency 1 --placement remote)
summary() { # label json
	python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
items = {i["name"]: i["quantity"] for i in d["cost"]["items"]}
calls = items.get("lambda requests", 0)
gbs = next((q for n, q in items.items() if n.startswith("lambda duration")), 0)
mean = 1e3 * gbs / (3008 / 1024) / calls if calls else 0
print(f"{sys.argv[1]:<28} test accuracy {100*d['test_accuracy']:.2f}%  median epoch {1e3*d['epoch_seconds_median']:7.1f} ms"
      f"  mean call {mean:5.1f} ms  calls {calls:6.0f}  cost ${d['cost_usd']:.6f}")
PY
}
meancall() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); i={x["name"]:x["quantity"] for x in d["cost"]["items"]}; print(round(1e3*i["lambda duration (3008 MB)"]/(3008/1024)/i["lambda requests"]))' "$1"; }

plain=$(BASE_PORT=19600 hack/lambda-emulators.sh up "$out/plain" 8)
echo "== Cora, 200 epochs: sync cpu vs lambda S=1" >&2
"${train[@]}" --epochs 200 --eval-every 200 --staleness sync 2>/dev/null >"$out/cpu.json"
summary "cpu sync" "$out/cpu.json"
"${train[@]}" --epochs 200 --eval-every 200 --staleness 1 "${lambda[@]}" --lambda-endpoints "$plain" 2>/dev/null >"$out/lambda.json"
summary "lambda S=1" "$out/lambda.json"

delay=$(($(meancall "$out/lambda.json") * factor))ms
echo "== stragglers: 1 call in 10 delayed by $delay ($factor× the mean call), $epochs epochs, S=1" >&2
slow=$(BASE_PORT=19700 hack/lambda-emulators.sh up "$out/slow" 8 --fault-every 10 --fault delay --fault-delay "$delay")
run=("${train[@]}" --epochs "$epochs" --eval-every "$epochs" --staleness 1 "${lambda[@]}")
for ((r = 1; r <= rounds; r++)); do
	"${run[@]}" --lambda-endpoints "$plain" 2>/dev/null >"$out/p.json" && summary "round $r undelayed" "$out/p.json"
	"${run[@]}" --lambda-endpoints "$slow" 2>/dev/null >"$out/s.json" && summary "round $r delayed" "$out/s.json"
	# shellcheck disable=SC2086
	"${run[@]}" --lambda-endpoints "$slow" $relaunch 2>/dev/null >"$out/r.json" && summary "round $r delayed, relaunch" "$out/r.json"
done
