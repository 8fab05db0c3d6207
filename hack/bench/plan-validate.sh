#!/usr/bin/env bash
# Validates the planner (pkg/plan, dorylus plan) on runs it was not calibrated on: each round
# calibrates on citeseer, amazon_computers and R-MAT graphs (dorylus plan calibrate, with
# aws-lambda-rie emulators for the call overhead), then trains GCN (staleness 1, EPOCHS epochs,
# no evaluation in the timed epochs) on the cpu backend with 1, 2 and 4 graph servers on each of
# DATASETS, on the cpu backend with LATENCY injected into every tensor task, and on the lambda
# backend through emulators whose every call is delayed by LATENCY, with 1, 2 and 4 graph
# servers. Each round predicts its runs with its own calibration, so that a calibration and the
# runs it predicts share the load of the (shared) machine. Prints, per run, the median over the
# rounds of the epoch time dorylus plan --local predicts and of the measured median epoch time,
# and the error; exits 1 when an error is above 25 %.
#
#   hack/bench/plan-validate.sh [ROUNDS] [EPOCHS] [DATASETS] [LATENCY]
#
# Defaults: 3 rounds, 20 epochs, "cora coauthor_cs" (datasets the calibration does not train),
# 20ms. CAL_ROUNDS (default 2) is each calibration's --rounds. Set CALIBRATION to a calibration
# file to use it in every round instead (the shipped one: pkg/plan/calibration.json). Without
# aws-lambda-rie (hack/tools.sh aws-lambda-rie) the lambda runs are skipped, and said so.
set -euo pipefail
rounds=${1:-3}
epochs=${2:-20}
datasets=${3:-cora coauthor_cs}
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
	calibration=${CALIBRATION:-$out/calibration-$r.json}
	if [[ -z ${CALIBRATION:-} ]]; then
		cal=(bin/dorylus plan calibrate --epochs "$epochs" --rounds "${CAL_ROUNDS:-2}" --output "$calibration")
		$lambda && cal+=(--lambda-endpoints "$plain")
		echo "== round $((r + 1)): ${cal[*]}" >&2
		"${cal[@]}"
	fi
	for i in "${!runs[@]}"; do
		IFS='|' read -r label ds p iv plan train <<<"${runs[$i]}"
		# shellcheck disable=SC2086
		t=$(bin/dorylus train --dataset "$ds" --graph-servers "$p" --intervals "$iv" --staleness 1 --epochs "$epochs" \
			--eval-every 1000000 --output json $train 2>"$out/err" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["epoch_seconds_median"])') || { cat "$out/err" >&2; exit 1; }
		# shellcheck disable=SC2086
		pred=$(bin/dorylus plan --calibration "$calibration" --dataset "$ds" --local --graph-servers "$p" --intervals "$iv" $plan --json |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["options"][0]["prediction"]["epochSeconds"])')
		echo "$i|$label|$ds|$p|$iv|$pred|$t" | tee -a "$out/times" >&2
	done
done

python3 - "$out/times" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    i, label, ds, p, iv, pred, t = line.strip().split("|")
    runs.setdefault(int(i), [label, ds, p, iv, [], []])
    runs[int(i)][4].append(float(pred))
    runs[int(i)][5].append(float(t))
print(f"{'run':<16} {'dataset':<18} {'gs':>3} {'intervals':>9} {'predicted':>12} {'measured':>12} {'error':>7}")
worst = 0
for i in sorted(runs):
    label, ds, p, iv, preds, ts = runs[i]
    pred, m = statistics.median(preds), statistics.median(ts)
    err = (pred - m) / m
    worst = max(worst, abs(err))
    print(f"{label:<16} {ds:<18} {p:>3} {iv:>9} {1e3*pred:9.1f} ms {1e3*m:9.1f} ms {100*err:+6.1f}%")
print(f"largest error {100*worst:.1f}% (target 25%); medians of {len(ts)} rounds")
sys.exit(1 if worst > 0.25 else 0)
PY
