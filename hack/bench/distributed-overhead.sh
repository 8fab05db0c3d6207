#!/usr/bin/env bash
# The cost of the distributed path against one process doing the same work (issue 23): for each
# dataset, the median epoch time (evaluation excluded) of
#   A: the single process on 1 core        B: the single process on 2 cores
#   C: 1 graph server + 1 parameter server on 1 core
#   D: 2 graph servers + 1 parameter server on 2 cores
# (cores given by taskset; every process of a run shares them), the four runs interleaved ROUNDS
# times so that load on the machine hits them alike; then C/A (goal ≤ 1.2) and the throughput of
# D over C (goal ≥ 1.6). GCN, staleness S (default 1), 8 intervals per graph server.
#
#   hack/bench/distributed-overhead.sh [ROUNDS] [EPOCHS] [DATASETS] [extra train flags...]
#
# Defaults: 3 rounds, 30 epochs, "datasets/coauthor_cs rmat:nodes=1000000,edges=20000000,features=128,classes=16,seed=1".
# Each dataset is prepared once (whole, and cut into 1 and 2 partitions) under a temporary folder.
# Set STALENESS to change S, CORES to name the two cores (default "0 1"), BIN to time another
# dorylus binary than the one built from this tree. VS, a list of train flags (such as
# "--update-every interval"), also times C and D with them, as C' and D', in the same rounds:
# both settings side by side under the same load; then D'/B and D/B besides.
set -euo pipefail
rounds=${1:-3}
epochs=${2:-30}
datasets=${3:-datasets/coauthor_cs rmat:nodes=1000000,edges=20000000,features=128,classes=16,seed=1}
shift $(($# < 3 ? $# : 3))
staleness=${STALENESS:-1}
read -r c0 c1 <<<"${CORES:-0 1}"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
dorylus=${BIN:-bin/dorylus}
[ -n "${BIN:-}" ] || go build -o bin/dorylus ./runtime/dorylus
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# epoch CORES DATASET [FLAGS...]: prints the median epoch seconds of one run.
epoch() {
	local cores=$1 data=$2
	shift 2
	taskset -c "$cores" "$dorylus" train --dataset "$data" --epochs "$epochs" --eval-every 100000 --output json "$@" \
		>"$out/run.json" 2>"$out/run.err" || { cat "$out/run.err" >&2; return 1; }
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["epoch_seconds_median"])' "$out/run.json"
}

read -r -a vs <<<"${VS:-}"
if [ ${#vs[@]} -eq 0 ]; then
	printf '%-28s %9s %9s %9s %9s %7s %9s\n' dataset "A 1p/1c" "B 1p/2c" "C 1gs/1c" "D 2gs/2c" "C/A" "D vs C"
else
	printf '%-28s %9s %9s %9s %9s %9s %9s %7s %9s %6s %7s %9s %6s\n' dataset "A 1p/1c" "B 1p/2c" "C 1gs/1c" "D 2gs/2c" "C' 1gs" "D' 2gs" \
		"C/A" "D vs C" "D/B" "C'/A" "D' vs C'" "D'/B"
fi
i=0
for ds in $datasets; do
	i=$((i + 1))
	whole="$out/d$i.dorylus"
	"$dorylus" prepare "$ds" "$whole" >/dev/null 2>&1
	"$dorylus" prepare "$whole" "$out/d$i.p1" --partitions 1 >/dev/null 2>&1
	"$dorylus" prepare "$whole" "$out/d$i.p2" --partitions 2 >/dev/null 2>&1
	dist=(--staleness "$staleness" --intervals 8 --dead-after 2m) # one shared core starves health checks
	: >"$out/times"
	for ((r = 0; r < rounds; r++)); do
		a=$(epoch "$c0" "$whole" "$@")
		b=$(epoch "$c0,$c1" "$whole" "$@")
		c=$(epoch "$c0" "$out/d$i.p1" --graph-servers 1 "${dist[@]}" "$@")
		d=$(epoch "$c0,$c1" "$out/d$i.p2" --graph-servers 2 "${dist[@]}" "$@")
		if [ ${#vs[@]} -eq 0 ]; then
			echo "$a $b $c $d" >>"$out/times"
			continue
		fi
		c2=$(epoch "$c0" "$out/d$i.p1" --graph-servers 1 "${dist[@]}" "${vs[@]}" "$@")
		d2=$(epoch "$c0,$c1" "$out/d$i.p2" --graph-servers 2 "${dist[@]}" "${vs[@]}" "$@")
		echo "$a $b $c $d $c2 $d2" >>"$out/times"
	done
	python3 - "$ds" "$out/times" <<'PY'
import statistics, sys
name, path = sys.argv[1:]
rows = [list(map(float, l.split())) for l in open(path) if l.strip()]
m = [statistics.median(r[i] for r in rows) for i in range(len(rows[0]))]
a, b, c, d = m[:4]
name = name if len(name) <= 28 else name[:25] + "..."
line = f"{name:<28} {a*1e3:7.1f}ms {b*1e3:7.1f}ms {c*1e3:7.1f}ms {d*1e3:7.1f}ms "
if len(m) == 4:
    print(line + f"{c/a:7.2f} {c/d:8.2f}x")
else:
    c2, d2 = m[4:]
    print(line + f"{c2*1e3:7.1f}ms {d2*1e3:7.1f}ms {c/a:7.2f} {c/d:8.2f}x {d/b:6.2f} {c2/a:7.2f} {c2/d2:8.2f}x {d2/b:6.2f}")
PY
done
