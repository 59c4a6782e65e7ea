#!/usr/bin/env bash
# Where SWL.CHECK spends its time, in instructions per call: runs
# redis-server under valgrind's callgrind (counts repeat exactly from run to
# run, whatever else the machine is doing), sends one workload, and prints
# the costliest functions under the command handler, and ZADD's total for
# comparison.
# `library` counts instead one-window calls of the function library
# (scripts/swl.lua), in each encoding (sorted sets, compact format
# versions 1 and 2), beside the usual script's
# (scripts/bench.sh's): admits into new logs (100,000 keys) and into logs
# that hold entries (2,000 keys), and denials (10 keys at their limit),
# each after a run of the same calls that fills the keys. Under callgrind
# calls come about one a millisecond, so the library's texts of times,
# which the calls of one millisecond share at full speed, are made on
# every call here.
# `steady` counts the library's one-window calls on one log in steady state
# (scripts/bench.sh's steady workload: ENTRIES entries an hour apart in
# all, each call one spacing later, trimming one and adding one), admitted,
# denied, admitted with every third call 30 ms behind the newest, and
# admitted with two windows (an hour and a minute), in each encoding
# beside the usual script's: the figures its targets are judged by, free
# of the machine's noise.
# Usage: scripts/profile.sh [admitted|denied|library] [requests] [zset|compact]
#        scripts/profile.sh steady [calls] [entries]
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-admitted}
case "$workload" in
    library) default_requests=4000 ;;
    steady) default_requests=500 ;;
    *) default_requests=20000 ;;
esac
requests=${2:-$default_requests}
# (steady's third argument is its log's entries; its library sets the encoding.)
encoding=zset
[ "$workload" = steady ] || encoding=${3:-zset}
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

# What the library workloads share.
cli() { redis-cli -p "$port" "$@"; }
# The body of bench.sh's script `$1` (LUA, LUA_AT, LUA_AT2), the usual
# script the library is measured against there.
bench_script() { sed -n "/^$1='/,/^return 0'/p" scripts/bench.sh | sed "1s/^$1='//; \$s/'\$//"; }
# a / b to two places, n/a where b is not above 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# Loads scripts/swl.lua, creating new logs in encoding $1.
load_library() {
    sed "s/^local ENCODING = 'compact'\$/local ENCODING = '$1'/" scripts/swl.lua | cli -x function load replace >/dev/null
}
# Instructions per call of `command` (a Redis command's function name)
# while the rest of the arguments run `requests` calls: callgrind's
# counters zeroed before, dumped after, and the command's inclusive count
# read from the newest dump.
per_call() {
    local command=$1 newest
    shift
    callgrind_control -z "$pid" >/dev/null
    "$@" >/dev/null 2>&1
    callgrind_control -d "$pid" >/dev/null
    newest=$(for f in "$dir"/callgrind.out.*; do echo "${f##*.} $f"; done | sort -n | tail -1 | cut -d' ' -f2)
    callgrind_annotate --inclusive=yes "$newest" 2>/dev/null |
        awk -v n="$requests" -v c="$command" '!done && $0 ~ ":" c " " { gsub(",", "", $1); printf "%.0f", $1 / n; done = 1 }'
}
# A row of a table of counts by path: its name (`width` wide), the
# script's count, and each library encoding's with its ratio to it.
declare -A counts
row() {
    local width=$1 name=$2 script=${counts[$2,script]} line path count
    line=$(printf "%-${width}s %10s" "$name" "$script")
    for path in zset compact1 compact; do
        count=${counts[$name,$path]}
        line+=$(printf ' %12s %8s' "$count" "$(ratio "$count" "$script")")
    done
    echo "$line"
}

if [ "$workload" = steady ]; then
    entries=${3:-10000}
    script=$(bench_script LUA_AT)
    sha=$(cli script load "$script")
    script2=$(bench_script LUA_AT2)
    sha2=$(cli script load "$script2")
    # Calls `from` to `to` - 1 on `key`: `prefix`, then now_ms one spacing
    # apart (or `fixed`; `behind`: every third 30 ms before the newest),
    # then `suffix`, as bench.sh's steady_calls.
    calls() {
        awk -v prefix="$1" -v from="$2" -v to="$3" -v n="$entries" -v fixed="${4:-}" -v suffix="${5:-}" 'BEGIN {
            s = 3600000 / n
            for (i = from; i < to; i++) {
                t = 1700000000000 + i * s
                if (fixed == "behind" && i % 3 == 2) t = t - s - 30
                else if (fixed != "" && fixed != "behind") t = fixed
                printf "%s %.0f%s\r\n", prefix, t, (suffix == "" ? "" : " " suffix)
            }
        }'
    }
    # Two windows as bench.sh's: an hour and 2n, a minute and twice the
    # entries in a minute plus 2 (the script: LUA_AT2, with a ZCOUNT).
    minute=$((2 * (entries / 60) + 2))
    warm=$((entries / 10 > 1000 ? entries / 10 : 1000))
    fixed=$(awk -v n="$entries" -v i=$((entries + warm - 1)) 'BEGIN { printf "%.0f", 1700000000000 + i * 3600000 / n + 1 }')
    for path in script zset compact1 compact; do
        cli flushall >/dev/null
        if [ "$path" = script ]; then
            prefix="EVALSHA $sha 1 st" command=evalShaCommand
            prefix2="EVALSHA $sha2 1 st:two" suffix2="60000 $minute"
        else
            load_library "$path"
            prefix="FCALL swl_check 1 st" command=fcallCommand
            prefix2="FCALL swl_check 1 st:two" suffix2="WINDOW 60000 $minute"
        fi
        calls "$prefix 3600000 99999999" 0 "$entries" | cli --pipe >/dev/null 2>&1
        calls "$prefix 3600000 $((2 * entries))" "$entries" $((entries + warm)) | cli --pipe >/dev/null 2>&1
        cli copy st st:denied >/dev/null
        cli copy st st:behind >/dev/null
        cli copy st st:two >/dev/null
        counts[admitted,$path]=$(calls "$prefix 3600000 $((2 * entries))" $((entries + warm)) $((entries + warm + requests)) | per_call "$command" cli --pipe)
        counts[denied,$path]=$(calls "${prefix/ st/ st:denied} 3600000 $entries" 0 "$requests" "$fixed" | per_call "$command" cli --pipe)
        counts[behind,$path]=$(calls "${prefix/ st/ st:behind} 3600000 $((2 * entries))" $((entries + warm)) $((entries + warm + requests)) behind | per_call "$command" cli --pipe)
        counts[two,$path]=$(calls "$prefix2 3600000 $((2 * entries))" $((entries + warm)) $((entries + warm + requests)) "" "$suffix2" | per_call "$command" cli --pipe)
    done
    echo "Instructions per call, one log of $entries entries in steady state, one window ($requests calls each; the library's ratio to the script)"
    printf '%-10s %10s %12s %8s %12s %8s %12s %8s\n' workload script "sorted set" "" "format 1" "" "format 2" ""
    for name in admitted denied behind two; do
        row 10 "$name"
    done
    echo "(two: two windows, an hour and a minute, admitted; the script with a ZCOUNT for the minute)"
    echo "two windows, format 2 over sorted set: $(ratio "${counts[two,compact]}" "${counts[two,zset]}")"
    exit 0
fi

if [ "$workload" = library ]; then
    script=$(bench_script LUA)
    sha=$(cli script load "$script")

    # Instructions per call of one workload: a run that fills the keys, then
    # `requests` calls counted.
    workload_per_call() {
        local keys=$1 command=$2
        shift 2
        cli flushall >/dev/null
        redis-benchmark -q -p "$port" -c 10 -P 16 -n "$requests" -r "$keys" "$@" >/dev/null 2>&1
        per_call "$command" redis-benchmark -q -p "$port" -c 10 -P 16 -n "$requests" -r "$keys" "$@"
    }

    # Each row: its name, keys and limit.
    workloads=("admitted, new logs:100000:1000" "admitted, logs with entries:2000:1000" "denied:10:10")
    for workload_row in "${workloads[@]}"; do
        IFS=: read -r name keys limit <<<"$workload_row"
        counts[$name,script]=$(workload_per_call "$keys" evalShaCommand EVALSHA "$sha" 1 "p:__rand_int__" 60000 "$limit")
    done
    for encoding in zset compact1 compact; do
        load_library "$encoding"
        for workload_row in "${workloads[@]}"; do
            IFS=: read -r name keys limit <<<"$workload_row"
            counts[$name,$encoding]=$(workload_per_call "$keys" fcallCommand FCALL swl_check 1 "p:__rand_int__" 60000 "$limit" '*')
        done
    done

    echo "Instructions per call, one window ($requests calls each; the library's ratio to the script)"
    printf '%-30s %10s %12s %8s %12s %8s %12s %8s\n' workload script "sorted set" "" "compact v1" "" "compact v2" ""
    for workload_row in "${workloads[@]}"; do
        IFS=: read -r name _ _ <<<"$workload_row"
        row 30 "$name"
    done
    exit 0
fi

case "$workload" in
    admitted) keys=100000 limit=1000 ;;
    denied) keys=10 limit=10 ;;
    *) echo "profile: workload is admitted, denied, library or steady" >&2; exit 1 ;;
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
