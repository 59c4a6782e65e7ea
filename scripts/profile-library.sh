#!/usr/bin/env bash
# Instructions per one-window call of the function library (scripts/swl.lua)
# and of the usual script (scripts/bench.sh's), under valgrind's callgrind:
# counts repeat from run to run, where times on a shared machine drift.
# Admits into new logs (100,000 keys) and into logs that hold entries
# (2,000 keys), and denials (10 keys at their limit), each after a run of
# the same calls that fills the keys.
# Under callgrind calls come about one a millisecond, so the library's
# texts of times, which the calls of one millisecond share at full speed,
# are made on every call here.
# Usage: scripts/profile-library.sh [requests]
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-4000}
command -v valgrind >/dev/null || { echo "profile-library: needs valgrind (apt-get install valgrind)" >&2; exit 1; }

dir=$(mktemp -d)
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

port=$((20000 + RANDOM % 20000))
valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --dir "$dir" >"$dir/valgrind.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" ping >/dev/null || { echo "profile-library: redis-server did not start" >&2; cat "$dir/valgrind.log" >&2; exit 1; }

cli() { redis-cli -p "$port" "$@"; }
script=$(sed -n "/^LUA='/,/^return 0'/p" scripts/bench.sh | sed "1s/^LUA='//; \$s/'\$//")
sha=$(cli script load "$script")
load_library() {
    sed "s/^local ENCODING = 'zset'\$/local ENCODING = '$1'/" scripts/swl.lua | cli -x function load replace >/dev/null
}

# Instructions per call of one workload: a run that fills the keys, then
# `requests` calls counted (callgrind's counters zeroed before, dumped
# after, and the command's inclusive count read from the newest dump).
per_call() {
    local keys=$1 command=$2
    shift 2
    cli flushall >/dev/null
    redis-benchmark -q -p "$port" -c 10 -P 16 -n "$requests" -r "$keys" "$@" >/dev/null 2>&1
    callgrind_control -z "$pid" >/dev/null
    redis-benchmark -q -p "$port" -c 10 -P 16 -n "$requests" -r "$keys" "$@" >/dev/null 2>&1
    callgrind_control -d "$pid" >/dev/null
    local newest
    newest=$(for f in "$dir"/callgrind.out.*; do echo "${f##*.} $f"; done | sort -n | tail -1 | cut -d' ' -f2)
    callgrind_annotate --inclusive=yes "$newest" 2>/dev/null |
        awk -v n="$requests" -v c="$command" '!done && $0 ~ ":" c " " { gsub(",", "", $1); printf "%.0f", $1 / n; done = 1 }'
}

workloads=("admitted, new logs:100000:1000" "admitted, logs with entries:2000:1000" "denied:10:10")
declare -A counts
for workload in "${workloads[@]}"; do
    IFS=: read -r name keys limit <<<"$workload"
    counts[$name,script]=$(per_call "$keys" evalShaCommand EVALSHA "$sha" 1 "p:__rand_int__" 60000 "$limit")
done
for encoding in zset compact; do
    load_library "$encoding"
    for workload in "${workloads[@]}"; do
        IFS=: read -r name keys limit <<<"$workload"
        counts[$name,$encoding]=$(per_call "$keys" fcallCommand FCALL swl_check 1 "p:__rand_int__" 60000 "$limit" '*')
    done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo "Instructions per call, one window ($requests calls each; the library's ratio to the script)"
printf '%-30s %10s %12s %8s %12s %8s\n' workload script "sorted set" "" compact ""
for workload in "${workloads[@]}"; do
    IFS=: read -r name _ _ <<<"$workload"
    printf '%-30s %10s %12s %8s %12s %8s\n' "$name" "${counts[$name,script]}" \
        "${counts[$name,zset]}" "$(ratio "${counts[$name,zset]}" "${counts[$name,script]}")" \
        "${counts[$name,compact]}" "$(ratio "${counts[$name,compact]}" "${counts[$name,script]}")"
done
