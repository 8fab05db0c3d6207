#!/usr/bin/env bash
# Measures how much of the tensor workers' latency the pipeline hides: trains on real graph-server
# and parameter-server processes with 0 ms and with LATENCY added to every tensor task, the runs
# interleaved ROUNDS times so that load on the machine hits them alike, and prints for each mode
# and placement the median epoch time of each latency, their ratio, the test accuracies and, of
# the runs with latency, how many tensor tasks ran remotely and in the graph servers and which
# kinds ran there.
#
#   [PLACEMENTS="auto remote"] hack/bench/latency-hiding.sh [DATASET] [LATENCY] [ROUNDS] [MODES] [extra train flags...]
#
# Defaults: datasets/coauthor_cs, 20ms, 5 rounds, modes "1 sync" (the staleness values to try),
# PLACEMENTS "auto" (--placement of the runs with latency: each is one more run a round; the
# 0 ms run places nothing), 2 graph servers, 8 intervals, 30 epochs with no evaluation inside
# the timed epochs.
set -euo pipefail
dataset=${1:-datasets/coauthor_cs}
latency=${2:-20ms}
rounds=${3:-5}
modes=${4:-1 sync}
placements=${PLACEMENTS:-auto}
shift $(($# < 4 ? $# : 4))
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
go build -o bin/dorylus ./runtime/dorylus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# epoch STALENESS LATENCY [FLAGS...]: prints "median_epoch_seconds test_accuracy remote_tasks
# local_tasks local_kinds" of one run (local_kinds: e.g. AV_1,∇AV_1, or -).
epoch() {
	bin/dorylus train --dataset "$dataset" --graph-servers 2 --intervals 8 --epochs 30 --eval-every 1000 \
		--staleness "$1" --inject-latency "$2" --output json "${@:3}" 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin); t=d.get("tensor_tasks") or {}
k=sorted({"%s_%d" % (x["task"], x["layer"]) for x in t.get("kinds") or [] if x["local"]})
print(d["epoch_seconds_median"], d["test_accuracy"], t.get("remote", 0), t.get("local", 0), ",".join(k) or "-")'
}

for mode in $modes; do
	rm -f "$tmp"/*
	for ((r = 0; r < rounds; r++)); do
		epoch "$mode" 0ms "$@" >>"$tmp/base"
		for pl in $placements; do
			epoch "$mode" "$latency" --placement "$pl" "$@" >>"$tmp/slow.$pl"
		done
	done
	for pl in $placements; do
		python3 - "$mode" "$latency" "$pl" "$tmp/base" "$tmp/slow.$pl" <<'EOF'
import statistics, sys
mode, lat, pl, bf, sf = sys.argv[1:]
def read(f):
    rows = [l.split() for l in open(f) if l.strip()]
    last = rows[-1]
    return statistics.median(float(r[0]) for r in rows), [float(r[1]) for r in rows], (float(last[2]), float(last[3]), last[4])
b, ba, _ = read(bf)
s, sa, (remote, local, kinds) = read(sf)
print(f"staleness {mode:>4}, placement {pl:>6}: epoch 0ms {b*1000:7.1f} ms, {lat} {s*1000:7.1f} ms, ratio {s/b:.2f}; "
      f"test accuracy {100*statistics.mean(ba):.2f}% / {100*statistics.mean(sa):.2f}%; "
      f"tensor tasks of a {lat} run: {remote:.0f} remote, {local:.0f} in the graph servers ({kinds})")
EOF
	done
done
