#!/usr/bin/env bash
# Where SWL.CHECK spends its time, in instructions per call: runs
# redis-server under valgrind's callgrind (counts repeat exactly from run to
# run, whatever else the machine is doing), sends one workload, and prints
# the costliest functions under the command handler, and ZADD's total for
# comparison.
# Usage: scripts/profile.sh [admitted|denied] [requests] [zset|compact]
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-admitted}
requests=${2:-20000}
encoding=${3:-zset}
MODULE=${SWL_MODULE:-$PWD/target/release/libredis_swl.so}
command -v valgrind >/dev/null || { echo "profile: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[ -f "$MODULE" ] || { echo "profile: module not built: $MODULE (run make build)" >&2; exit 1; }

dir=$(mktemp -d)
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

port=$((20000 + RANDOM % 20000))
valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --dir "$dir" --loadmodule "$MODULE" --swl.encoding "$encoding" \
    >"$dir/valgrind.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

case "$workload" in
    admitted) keys=100000 limit=1000 ;;
    denied) keys=10 limit=10 ;;
    *) echo "profile: workload is admitted or denied" >&2; exit 1 ;;
esac
bench() { redis-benchmark -q -p "$port" -c 10 -P 16 -n "$requests" -r "$keys" "$@" >/dev/null 2>&1; }
bench SWL.CHECK "swl:__rand_int__" 60000 "$limit" '*'
bench ZADD "zadd:__rand_int__" 1 m
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" 2>/dev/null || true
pid=""

echo "Instructions per call, $workload workload, $encoding logs ($requests calls each)"
callgrind_annotate --tree=calling --inclusive=yes "$dir/callgrind.out" 2>/dev/null | awk -v n="$requests" '
    function per_call(s) { gsub(",", "", s); return s / n }
    /\*  .*__do_command/ { split($0, f, " "); printf "%-40s %8.0f\n", "SWL.CHECK (module handler, total)", per_call(f[1]); inside = 1; next }
    /\*  .*:zaddCommand / { split($0, f, " "); printf "%-40s %8.0f\n", "ZADD (command, total)", per_call(f[1]) }
    inside && /^ *[0-9,]+ .* >   / {
        split($0, f, " "); name = $0; sub(/.*>   \?\?\?:/, "", name); sub(/ \(.*/, "", name); sub(/<redis_swl::[^>]* as /, "<", name)
        if (per_call(f[1]) >= 100) printf "  %-38s %8.0f\n", substr(name, 1, 38), per_call(f[1])
    }
    inside && /^$/ { inside = 0 }'
