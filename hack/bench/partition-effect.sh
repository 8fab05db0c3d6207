#!/usr/bin/env bash
# Effect of the partitioner on distributed training: runs `dorylus train --graph-servers G` with
# two dorylus binaries (e.g. one built before the multilevel default and one after), alternating
# them REPEATS times so that both see the same machine load, and prints for each run the median
# bytes exchanged between graph servers per epoch and the median epoch time.
#
#   hack/bench/partition-effect.sh BEFORE_BIN AFTER_BIN DATASET [GRAPH_SERVERS] [EPOCHS] [REPEATS]
#
# Build the "before" binary from an older commit, e.g.
#   git worktree add --detach /tmp/before <commit> && (cd /tmp/before && go build -o /tmp/dorylus-before ./runtime/dorylus)
set -euo pipefail
if [ $# -lt 3 ]; then
	sed -n '2,11p' "$0" >&2
	exit 2
fi
before=$1 after=$2 dataset=$3 servers=${4:-4} epochs=${5:-30} repeats=${6:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf 'binary\trun\tbytes_per_epoch\tepoch_seconds\ttest_accuracy\n'
for r in $(seq 1 "$repeats"); do
	for which in before after; do
		bin=$before
		[ "$which" = after ] && bin=$after
		"$bin" train --dataset "$dataset" --graph-servers "$servers" --epochs "$epochs" --output json \
			>"$out/$which.json" 2>"$out/$which.err" || { cat "$out/$which.err" >&2; exit 1; }
		bytes=$(sed -n 's/.*bytes between graph servers per epoch: median \([0-9]*\).*/\1/p' "$out/$which.err")
		secs=$(sed -n 's/^  "epoch_seconds_median": \([0-9.e-]*\),*$/\1/p' "$out/$which.json")
		acc=$(sed -n 's/^  "test_accuracy": \([0-9.e-]*\),*$/\1/p' "$out/$which.json")
		printf '%s\t%d\t%s\t%s\t%s\n' "$which" "$r" "$bytes" "$secs" "$acc"
	done
done
