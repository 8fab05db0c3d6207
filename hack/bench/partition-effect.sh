#!/usr/bin/env bash
# Effect of the partitioner on distributed training: prepares DATASET once, cuts it into
# GRAPH_SERVERS partitions by each method (contiguous and multilevel), then runs `dorylus train
# --graph-servers GRAPH_SERVERS` on each directory, alternating them REPEATS times so that both
# see the same machine load, and prints for each run the median bytes exchanged between graph
# servers per epoch, the median epoch time and the cut.
#
#   hack/bench/partition-effect.sh BIN DATASET [GRAPH_SERVERS] [EPOCHS] [REPEATS] [TRAIN_FLAGS...]
#
# e.g. hack/bench/partition-effect.sh bin/dorylus rmat:nodes=1000000,edges=20000000,features=128,classes=16,seed=1 4 5 2
set -euo pipefail
if [ $# -lt 2 ]; then
	sed -n '2,10p' "$0" >&2
	exit 2
fi
bin=$1 dataset=$2 servers=${3:-4} epochs=${4:-30} repeats=${5:-3}
shift $(($# < 5 ? $# : 5))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin" prepare "$dataset" "$out/whole.dorylus" >&2
for m in contiguous multilevel; do
	/usr/bin/time -f "$m: prepare %e s, peak RSS %M KiB" "$bin" prepare "$out/whole.dorylus" "$out/$m" --partitions "$servers" --method "$m" >&2
done
printf 'method\trun\tbytes_per_epoch\tepoch_seconds\ttest_accuracy\tcut\n'
for r in $(seq 1 "$repeats"); do
	for m in contiguous multilevel; do
		"$bin" train --dataset "$out/$m" --graph-servers "$servers" --epochs "$epochs" --eval-every "$epochs" --output json "$@" \
			>"$out/$m.json" 2>"$out/$m.err" || { cat "$out/$m.err" >&2; exit 1; }
		bytes=$(sed -n 's/.*bytes between graph servers per epoch: median \([0-9]*\).*/\1/p' "$out/$m.err")
		secs=$(sed -n 's/^  "epoch_seconds_median": \([0-9.e-]*\),*$/\1/p' "$out/$m.json")
		acc=$(sed -n 's/^  "test_accuracy": \([0-9.e-]*\),*$/\1/p' "$out/$m.json")
		cut=$(sed -n 's/.*edge cut \([0-9.]*\).*/\1/p' "$out/$m.err" | head -1)
		printf '%s\t%d\t%s\t%s\t%s\t%s\n' "$m" "$r" "$bytes" "$secs" "$acc" "$cut"
	done
done
