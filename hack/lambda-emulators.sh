#!/usr/bin/env bash
# Starts and stops AWS Lambda runtime interface emulators (aws-lambda-rie, see hack/tools.sh)
# running `dorylus function`, on loopback, for the lambda backend without AWS:
#
#   hack/lambda-emulators.sh up DIR N [function flags...]   prints the N endpoints, comma-separated
#   hack/lambda-emulators.sh down DIR                       stops the emulators started in DIR
#
# An emulator serves one invocation at a time, of the function named "function": invoke them
# with --lambda-function function, --endpoint-concurrency 1 (dorylus train then deals them out
# among its graph servers), any region and static credentials in the environment (the emulator
# checks none). DORYLUS names the dorylus binary (default: bin/dorylus, built if missing);
# BASE_PORT (default 19500) is the first of the 2N ports used; AWS_LAMBDA_FUNCTION_TIMEOUT
# (seconds) in the environment is the emulated function timeout. Emulator I logs to DIR/rie-I.log.
set -euo pipefail
cmd=${1:?usage: $0 up DIR N [function flags...] | down DIR}
dir=${2:?usage: $0 up DIR N [function flags...] | down DIR}
root=$(cd "$(dirname "$0")/.." && pwd)

case $cmd in
up)
	n=${3:?usage: $0 up DIR N [function flags...]}
	shift 3
	mkdir -p "$dir"
	if [[ -s $dir/pids ]]; then
		echo "lambda-emulators: $dir/pids exists: run $0 down $dir first" >&2
		exit 1
	fi
	dorylus=${DORYLUS:-$root/bin/dorylus}
	if [[ ! -x $dorylus ]]; then
		(cd "$root" && go build -o "$dorylus" ./runtime/dorylus)
	fi
	rie=$(command -v aws-lambda-rie || true)
	rie=${rie:-$HOME/.cache/dorylus/bin/aws-lambda-rie}
	if [[ ! -x $rie ]]; then
		echo "lambda-emulators: aws-lambda-rie is neither on PATH nor in ~/.cache/dorylus/bin: run hack/tools.sh aws-lambda-rie" >&2
		exit 1
	fi
	base=${BASE_PORT:-19500}
	eps=()
	for ((i = 0; i < n; i++)); do
		port=$((base + 2 * i))
		setsid "$rie" --runtime-interface-emulator-address "127.0.0.1:$port" --runtime-api-address "127.0.0.1:$((port + 1))" \
			"$dorylus" function "$@" >"$dir/rie-$i.log" 2>&1 </dev/null &
		echo $! >>"$dir/pids"
		eps+=("http://127.0.0.1:$port")
	done
	for ep in "${eps[@]}"; do # wait until each answers
		for ((t = 0; t < 300; t++)); do
			curl -s -o /dev/null "$ep/" && break
			sleep 0.1
		done
	done
	(IFS=,; echo "${eps[*]}")
	;;
down)
	if [[ -f $dir/pids ]]; then
		while read -r pid; do
			kill -- "-$pid" 2>/dev/null || true # the emulator's process group: it and its function
		done <"$dir/pids"
		rm -f "$dir/pids"
	fi
	;;
*)
	echo "usage: $0 up DIR N [function flags...] | down DIR" >&2
	exit 2
	;;
esac
