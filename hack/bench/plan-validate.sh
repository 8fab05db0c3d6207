#!/usr/bin/env bash
# Validates the planner (pkg/plan, dorylus plan) on runs it was not calibrated on: calibrates on
# citeseer (dorylus plan calibrate, with aws-lambda-rie emulators for the call latency), then
# trains GCN (staleness 1, EPOCHS epochs, no evaluation in the timed epochs) on the cpu backend
# with 1, 2 and 4 graph servers on each of DATASETS, on the cpu backend with LATENCY injected into
# every tensor task, and on the lambda backend through emulators whose every call is delayed by
# LATENCY, with 1, 2 and 4 graph servers; the runs are interleaved ROUNDS times so that load on
# the machine hits them alike. Prints, per run, the epoch time dorylus plan --local predicts,
# the median measured one and the error; exits 1 when an error is above 25 %.
#
#   hack/bench/plan-validate.sh [ROUNDS] [EPOCHS] [DATASETS] [LATENCY]
#
# Defaults: 3 rounds, 20 epochs, "cora coauthor_cs amazon_computers", 20ms. Set CALIBRATION to a
# calibration file to skip calibrating (the shipped one: pkg/plan/calibration.json). Without
# aws-lambda-rie (hack/tools.sh aws-lambda-rie) the lambda runs are skipped, and said so.
set -euo pipefail
rounds=${1:-3}
epochs=${2:-20}
datasets=${3:-cora coauthor_cs amazon_computers}
latency=${4:-20ms}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
go build -o bin/dorylus ./runtime/dorylus
export AWS_ACCESS_KEY_ID=emulator AWS_SECRET_ACCESS_KEY=emulator AWS_EC2_METADATA_DISABLED=true
out=$(mktemp -d)
trap 'hack/lambda-emulators.sh down "$out/plain" 2>/dev/null; hack/lambda-emulators.sh down "$out/slow" 2>/dev/null; rm -rf "$out"' EXIT

lambda=true
if ! command -v aws-lambda-rie >/dev/null && [[ ! -x $HOME/.cache/dorylus/bin/aws-lambda-rie ]]; then
	echo "plan-validate: no aws-lambda-rie: the lambda runs are skipped (hack/tools.sh aws-lambda-rie)" >&2
	lambda=false
fi
# The lambda runs: 2 intervals per graph server, one emulator for each (they serve one call at a time).
if $lambda; then
	plain=$(BASE_PORT=19800 hack/lambda-emulators.sh up "$out/plain" 4)
	slow=$(BASE_PORT=19820 hack/lambda-emulators.sh up "$out/slow" 8 --fault-every 1 --fault delay --fault-delay "$latency")
fi
lambdaflags() { # ENDPOINTS
	echo "--backend lambda --lambda-function function --lambda-region us-east-1 --endpoint-concurrency 1 --lambda-endpoints $1"
}

calibration=${CALIBRATION:-}
if [[ -z $calibration ]]; then
	calibration=$out/calibration.json
	cal=(bin/dorylus plan calibrate --epochs "$epochs" --output "$calibration")
	$lambda && cal+=(--lambda-endpoints "$plain")
	echo "== ${cal[*]}" >&2
	"${cal[@]}"
fi

# The runs: "label|dataset|graph servers|intervals|dorylus plan flags|dorylus train flags".
runs=()
for ds in $datasets; do
	for p in 1 2 4; do
		runs+=("cpu|$ds|$p|4|--backends cpu|")
	done
done
runs+=("cpu +$latency|cora|2|8|--backends cpu --call-latency $latency|--inject-latency $latency")
if $lambda; then
	IFS=, read -ra eps <<<"$slow"
	for p in 1 2 4; do
		n=$((2 * p))
		list=$(IFS=,; echo "${eps[*]:0:n}")
		runs+=("lambda +$latency|cora|$p|2|--backends lambda --memory-mb 3008 --concurrency-per-interval 1 --call-latency $latency|$(lambdaflags "$list")")
	done
fi

: >"$out/times"
for ((r = 0; r < rounds; r++)); do
	for i in "${!runs[@]}"; do
		IFS='|' read -r _ ds p iv _ train <<<"${runs[$i]}"
		# shellcheck disable=SC2086
		t=$(bin/dorylus train --dataset "$ds" --graph-servers "$p" --intervals "$iv" --staleness 1 --epochs "$epochs" \
			--eval-every 1000000 --output json $train 2>"$out/err" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["epoch_seconds_median"])') || { cat "$out/err" >&2; exit 1; }
		echo "$i $t" >>"$out/times"
	done
done

printf '%-16s %-18s %3s %9s %12s %12s %7s\n' run dataset gs intervals predicted measured error
: >"$out/table"
for i in "${!runs[@]}"; do
	IFS='|' read -r label ds p iv plan _ <<<"${runs[$i]}"
	# shellcheck disable=SC2086
	pred=$(bin/dorylus plan --calibration "$calibration" --dataset "$ds" --local --graph-servers "$p" --intervals "$iv" $plan --json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["options"][0]["prediction"]["epochSeconds"])')
	echo "$i|$label|$ds|$p|$iv|$pred" >>"$out/table"
done
python3 - "$out/table" "$out/times" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[2]):
    i, t = line.split()
    times.setdefault(i, []).append(float(t))
worst = 0
for line in open(sys.argv[1]):
    i, label, ds, p, iv, pred = line.strip().split("|")
    m = statistics.median(times[i])
    err = (float(pred) - m) / m
    worst = max(worst, abs(err))
    print(f"{label:<16} {ds:<18} {p:>3} {iv:>9} {1e3*float(pred):9.1f} ms {1e3*m:9.1f} ms {100*err:+6.1f}%")
print(f"largest error {100*worst:.1f}% (target 25%)")
sys.exit(1 if worst > 0.25 else 0)
PY
