#!/usr/bin/env bash
# Trains the same GCN with dorylus and with a PyTorch reference, one after the other on the same
# machine, and prints each side's median epoch time, accuracy and peak RSS, and their ratio.
#
#   hack/bench/gcn-vs-torch.sh PEERS_DIR [real|rmat100k|rmat1m|all]
#
# PEERS_DIR holds torch_gcn.py (the reference trainer, run with Debian's /usr/bin/python3 and
# python3-torch). Epoch time is forward + loss + backward + update, evaluation excluded, on both.
set -euo pipefail
peers=${1:?usage: $0 PEERS_DIR [real|rmat100k|rmat1m|all]}
what=${2:-all}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
go build -o bin/dorylus ./runtime/dorylus
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

ratio() { # name torch_epoch_s dorylus_epoch_s torch_rss_mib dorylus_rss_mib [torch_acc dorylus_acc]
	awk -v n="$1" -v t="$2" -v d="$3" -v tr="$4" -v dr="$5" -v ta="${6:-}" -v da="${7:-}" 'BEGIN {
		acc = (ta == "") ? "" : sprintf("  accuracy torch %.2f%% dorylus %.2f%%", 100*ta, 100*da)
		printf "%-22s epoch torch %8.4fs dorylus %8.4fs ratio %.2f  peak RSS torch %6.0f MiB dorylus %6.0f MiB%s\n", n, t, d, d/t, tr, dr, acc }'
}
jsonfield() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }

if [[ $what == real || $what == all ]]; then
	/usr/bin/python3 "$peers/torch_gcn.py" datasets --root datasets --names cora,citeseer,coauthor_cs --seeds 10 --epochs 200 | tee "$out/torch.txt" >&2
	grep '^JSON ' "$out/torch.txt" | sed 's/^JSON //' > "$out/torch.json"
	i=0
	for name in cora citeseer coauthor_cs; do
		bin/dorylus train --dataset "datasets/$name" --runs 10 --output json 2>/dev/null > "$out/$name.json"
		ratio "$name" \
			"$(jsonfield "$out/torch.json" "d[$i]['epoch_median_ms']/1000")" \
			"$(jsonfield "$out/$name.json" "d['epoch_seconds_median']")" \
			0 "$(jsonfield "$out/$name.json" "d['peak_rss_bytes']/2**20")" \
			"$(jsonfield "$out/torch.json" "d[$i]['test_acc_mean']")" \
			"$(jsonfield "$out/$name.json" "d['test_accuracy']")"
		i=$((i + 1))
	done
fi

synthetic() { # nodes edges epochs
	/usr/bin/python3 "$peers/torch_gcn.py" synthetic --nodes "$1" --edges "$2" --epochs "$3" | tee "$out/torch-$1.txt" >&2
	grep '^JSON ' "$out/torch-$1.txt" | sed 's/^JSON //' > "$out/torch-$1.json"
	bin/dorylus train --dataset "rmat:nodes=$1,edges=$2,features=128,classes=16,seed=1" --hidden 128 \
		--epochs "$3" --eval-every "$3" --output json 2>/dev/null > "$out/dorylus-$1.json"
	ratio "rmat $1/$2" \
		"$(jsonfield "$out/torch-$1.json" "d['epoch_median_s']")" \
		"$(jsonfield "$out/dorylus-$1.json" "d['epoch_seconds_median']")" \
		"$(jsonfield "$out/torch-$1.json" "d['peak_rss_process_mib']")" \
		"$(jsonfield "$out/dorylus-$1.json" "d['peak_rss_bytes']/2**20")"
}
if [[ $what == rmat100k || $what == all ]]; then synthetic 100000 2000000 20; fi
if [[ $what == rmat1m || $what == all ]]; then synthetic 1000000 20000000 10; fi
