#!/usr/bin/env bash
# Measures SWL.CHECK against the baselines it replaces, all in one run on
# one server with one client setting, and prints ratios. Every ratio, in a
# column named "vs X", is how many times better SWL.CHECK does than X
# (more requests per second, fewer microseconds, fewer bytes): above 1 is
# better.
#   throughput  PING, a bare ZADD, the usual Lua script (EVALSHA), the
#               function library scripts/swl.lua (FCALL swl_check) and
#               SWL.CHECK, on several workloads (redis-benchmark)
#   memory      bytes per tracked request, against the script's key layout
#   latency     server-side p50/p99 on a hot key with 100,000 entries, and
#               the cost of trimming a 100,000-entry backlog in one call
#   windows     the flagship multi-window check (an hour / 100,000 plus a
#               minute / 5,000) against the function library on the same
#               log, in every encoding, and the most expensive single calls
#               of the module and the library: the most windows a call
#               may have (100) on a 100,000-entry log, the largest cost,
#               entries out of order
#   compact     the compact encoding against its targets, compact format
#               version 2 (swl.encoding compact) beside version 1
#               (compact1), and the function library on compact logs
#               beside the module
#   formats     bytes per request by arrival pattern and the two-window
#               check by the size of the log, in a sorted set and both
#               compact format versions
#   library     the function library against the usual script on the
#               one-window workloads: time per call, commands per call,
#               and the Lua time around them; and the same commands with
#               no more Lua than the script's, which is the floor
#   refund      SWL.REFUND's server time beside SWL.CHECK's, in every
#               encoding, and through the function library
#   patterns    bytes per entry of one log built under out-of-order
#               arrivals (a client an hour behind, calls up to ten
#               minutes behind, inserts crafted after blocks' first
#               times, three servers 30 ms apart), tiny logs, in both
#               compact format versions and a sorted set
#   behind      server time per call of three servers 30 ms apart against
#               in-order calls, at 100 a second in a one-minute window,
#               module, library and script
#   costliest   the slowest single call among candidates on logs of
#               format version 2 built out of order, module and library
#   steady      server time per call of a client's log in steady state
#               (n entries evenly over an hour, each call trimming one
#               and adding one), n = 10 to 100,000: the usual script, the
#               library and the module in each encoding, one window, two
#               windows, denied and calls 30 ms behind the newest
# Where the library cannot read a log (WRONGTYPE), its figure is "failed".
# Usage: scripts/bench.sh [requests per throughput run]
#        BENCH_ONLY=worst|rewrites|speed|library|formats|patterns|behind|costliest|steady scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-${BENCH_REQUESTS:-500000}}
CLIENTS=${BENCH_CLIENTS:-50}
PIPELINE=${BENCH_PIPELINE:-16}
MODULE=${SWL_MODULE:-$PWD/target/release/libredis_swl.so}
[ -f "$MODULE" ] || { echo "bench: module not built: $MODULE (run make build)" >&2; exit 1; }

dir=$(mktemp -d)
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

port_is_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_server() {
    local attempt
    for attempt in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 20000))
        port_is_free "$port" || continue
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$dir" --logfile "$dir/redis.log" --loadmodule "$MODULE" --swl.encoding zset &
        pid=$!
        local i
        for i in $(seq 1 200); do
            if redis-cli -p "$port" ping >/dev/null 2>&1; then return 0; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""
    done
    echo "bench: redis-server did not start; log:" >&2
    cat "$dir/redis.log" >&2 || true
    exit 1
}

cli() { redis-cli -p "$port" "$@"; }

# Requests per second of one redis-benchmark run of the given command.
rps() {
    local keyspace=$1; shift
    redis-benchmark -p "$port" -c "$CLIENTS" -P "$PIPELINE" -n "$REQUESTS" -r "$keyspace" --csv "$@" 2>/dev/null |
        awk -F'","' 'NR == 2 { print $2 + 0 }'
}

# The usual script: server time, trim, count, add with a unique member
# (time in microseconds plus the count), expiry.
LUA='local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - window)
local count = redis.call("ZCARD", KEYS[1])
if count < limit then
  redis.call("ZADD", KEYS[1], now, t[1] .. t[2] .. "-" .. count)
  redis.call("PEXPIRE", KEYS[1], window)
  return 1
end
return 0'

# a / b, or n/a where either is not a number (a call that failed).
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b + 0 <= 0) print "n/a"; else printf "%.2f", a / b }'
}

# yes where `value` is at most `target`, no where it is more, n/a where
# either is not a number.
at_most() {
    awk -v v="$1" -v t="$2" 'BEGIN {
        if (v !~ /^[0-9.]+$/ || t !~ /^[0-9.]+$/) print "n/a"; else if (v + 0 <= t + 0) print "yes"; else print "no" }'
}

# The median of the numbers on stdin, one a line; "failed" where any is.
median() {
    sort -n | awk '$1 !~ /^[0-9.]+$/ { failed = 1 } { v[NR] = $1 }
        END { if (failed || NR == 0) print "failed"; else print v[int((NR + 1) / 2)] }'
}

# Server-side microseconds per call of one command since the last reset.
usec_per_call() {
    cli info commandstats | tr -d '\r' | awk -F'[:=,]' -v c="cmdstat_$1" '$1 == c { print $7 }'
}

# usec_per_call, or "failed" where any of the calls since the last reset
# replied an error or was rejected (a library that cannot read a log
# replies WRONGTYPE: its time is not the time of the call measured).
call_time() {
    local failed
    failed=$(cli info commandstats | tr -d '\r' | awk -F'[:=,]' -v c="cmdstat_$1" '$1 == c { print $9 + $11 }')
    if [ "${failed:-0}" -gt 0 ]; then echo failed; else usec_per_call "$1"; fi
}

# The median server microseconds of one call made `repeat` times ({i} in
# an argument becomes the run's number, 1 to repeat), or "failed".
timed() {
    local repeat=$1 i stat
    shift
    stat=$(echo "$1" | tr '[:upper:]' '[:lower:]')
    for i in $(seq 1 "$repeat"); do
        cli config resetstat >/dev/null
        cli "${@//\{i\}/$i}" >/dev/null
        call_time "$stat"
    done | median
}

# What a log key holds: zset, v1 or v2 (a compact log's format version,
# its byte 4), or what TYPE says of anything else.
format_of() {
    local type
    type=$(cli type "$1" | tr -d '\r')
    case "$type" in
        zset) echo zset ;;
        string) echo "v$(cli getrange "$1" 4 4 | od -An -tu1 | awk '{ print $1 }')" ;;
        *) echo "$type" ;;
    esac
}

# The log format each swl.encoding (and the library's ENCODING) writes.
format_written_by() {
    case "$1" in
        zset) echo zset ;;
        compact1) echo v1 ;;
        compact) echo v2 ;;
    esac
}

throughput() {
    local name=$1 keyspace=$2 limit=$3
    cli flushall >/dev/null
    local ping zadd lua library swl
    cli config resetstat >/dev/null
    ping=$(rps "$keyspace" PING)
    zadd=$(rps "$keyspace" ZADD "zadd:$name:__rand_int__" 1 m)
    lua=$(rps "$keyspace" EVALSHA "$sha" 1 "lua:$name:__rand_int__" 60000 "$limit")
    library=$(rps "$keyspace" FCALL swl_check 1 "fn:$name:__rand_int__" 60000 "$limit" '*')
    swl=$(rps "$keyspace" SWL.CHECK "swl:$name:__rand_int__" 60000 "$limit" '*')
    printf '%-10s %10.0f %10.0f %10.0f %10.0f %10.0f %10s %10s %10s\n' "$name" "$ping" "$zadd" "$lua" "$library" \
        "$swl" "$(ratio "$swl" "$lua")" "$(ratio "$swl" "$library")" "$(ratio "$swl" "$zadd")"
    local zadd_us lua_us library_us swl_us
    zadd_us=$(usec_per_call zadd)
    lua_us=$(usec_per_call evalsha)
    library_us=$(usec_per_call fcall)
    swl_us=$(usec_per_call swl.check)
    server_time+=("$(printf '%-10s %10s %10s %10s %10s %10s %10s %10s' "$name" "$zadd_us" "$lua_us" "$library_us" \
        "$swl_us" "$(ratio "$lua_us" "$swl_us")" "$(ratio "$library_us" "$swl_us")" "$(ratio "$zadd_us" "$swl_us")")")
}

# Sends N generated inline commands through one pipelined connection.
pipe_commands() { cli --pipe >/dev/null; }

# The same for calls that are measured, whose error replies call_time
# reports ("failed"): redis-cli --pipe prints each and exits non-zero.
pipe_measured() { cli --pipe >/dev/null 2>&1 || true; }

memory_per_entry() {
    local n=$1 base=1700000000000
    cli flushall >/dev/null
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = 0; i < n; i++) printf "SWL.CHECK mem:swl 1000000000 1000000000 %.0f\r\n", b + i }' | pipe_commands
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = 0; i < n; i++) printf "ZADD mem:lua %.0f %.0f\r\n", b + i, b + i }' | pipe_commands
    cli config set swl.encoding compact >/dev/null
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = 0; i < n; i++) printf "SWL.CHECK mem:cpt 1000000000 1000000000 %.0f\r\n", b + i }' | pipe_commands
    cli config set swl.encoding zset >/dev/null
    local swl lua cpt
    swl=$(cli memory usage mem:swl samples 0)
    lua=$(cli memory usage mem:lua samples 0)
    cpt=$(cli memory usage mem:cpt samples 0)
    per() { awk -v m="$1" -v n="$n" 'BEGIN { printf "%.1f", m / n }'; }
    printf '%-10s %12s %12s %12s %12s %12s %13s\n' "$n" "$(per "$lua")" "$(per "$swl")" "$(per "$cpt")" \
        "$(ratio "$lua" "$swl")" "$(ratio "$lua" "$cpt")" "$(cli object encoding mem:swl)"
}

# p50 and p99 (microseconds) of one command since the last CONFIG RESETSTAT.
percentiles() {
    cli info latencystats | tr -d '\r' | awk -F'[:=,]' -v c="latency_percentiles_usec_$1" \
        '$1 == c { printf "%s %s", $3, $5 }'
}

# Total microseconds spent in one command since the last CONFIG RESETSTAT.
usec_total() {
    cli info commandstats | tr -d '\r' | awk -F'[:=,]' -v c="cmdstat_$1" '$1 == c { print $5 }'
}

hot_key_latency() {
    local n=100000 base=1700000000000
    cli flushall >/dev/null
    # A log with 100,000 entries, one per millisecond; each further check
    # at the next millisecond trims exactly one and adds one.
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = 0; i < n; i++) printf "SWL.CHECK hot %d 1000000000 %.0f\r\n", n, b + i }' | pipe_commands
    awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "ZADD zhot %d %d\r\n", i, i }' | pipe_commands
    cli config resetstat >/dev/null
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = n; i < 2 * n; i++) printf "SWL.CHECK hot %d 1000000000 %.0f\r\n", n, b + i }' | pipe_commands
    awk -v n="$n" 'BEGIN { for (i = n; i < 2 * n; i++) printf "ZADD zhot %d %d\r\n", i, i }' | pipe_commands
    read -r swl_p50 swl_p99 <<<"$(percentiles swl.check)"
    read -r zadd_p50 zadd_p99 <<<"$(percentiles zadd)"
    # The same on a compact log.
    cli config set swl.encoding compact >/dev/null
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = 0; i < n; i++) printf "SWL.CHECK hotc %d 1000000000 %.0f\r\n", n, b + i }' | pipe_commands
    cli config resetstat >/dev/null
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = n; i < 2 * n; i++) printf "SWL.CHECK hotc %d 1000000000 %.0f\r\n", n, b + i }' | pipe_commands
    cli config set swl.encoding zset >/dev/null
    read -r cpt_p50 cpt_p99 <<<"$(percentiles swl.check)"
    printf '%-34s %10s %10s\n' "" "p50 (us)" "p99 (us)"
    printf '%-34s %10s %10s\n' "SWL.CHECK sorted set, 100k in window" "$swl_p50" "$swl_p99"
    printf '%-34s %10s %10s\n' "SWL.CHECK compact, 100k in window" "$cpt_p50" "$cpt_p99"
    printf '%-34s %10s %10s\n' "ZADD, 100k-200k entries" "$zadd_p50" "$zadd_p99"
    printf 'p99 vs ZADD: sorted set %s (target >= 0.5), compact %s (target >= 1)\n' \
        "$(ratio "$zadd_p99" "$swl_p99")" "$(ratio "$zadd_p99" "$cpt_p99")"
}

# One call that must trim `n` entries that have left the window, with
# `kept` still inside it; against ZREMRANGEBYSCORE on an equal set.
backlog_trim() {
    local n=$1 kept=$2 base=1700000000000
    cli flushall >/dev/null
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = 0; i < n; i++) printf "SWL.CHECK backlog 1000000000 1000000000 %.0f\r\n", b + i }' | pipe_commands
    awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "ZADD zbacklog %d %d\r\n", i, i }' | pipe_commands
    local later=$((base + n + 1000))
    if [ "$kept" -gt 0 ]; then
        cli swl.check backlog 1000000000 1000000000 "$later" >/dev/null
        cli zadd zbacklog "$((n + 1000))" keep >/dev/null
    fi
    cli config resetstat >/dev/null
    cli swl.check backlog 1000 1000000000 "$((later + 999))" >/dev/null
    cli zremrangebyscore zbacklog -inf "$((n - 1))" >/dev/null
    printf '%-10s %-6s %12s %18s\n' "$n" "$kept" "$(usec_total swl.check)" "$(usec_total zremrangebyscore)"
}

clock_ms() { cli time | tr -d '\r' | awk 'NR == 1 { s = $1 } NR == 2 { printf "%.0f", s * 1000 + int($1 / 1000) }'; }

# An hour / 100,000 plus a minute / 5,000 on a log of 49,900 entries, 4,900
# of them in the last minute; the same log under two keys, one checked by
# the module, one by the function library, with the same calls.
multi_window() {
    local calls=20000 clock
    cli flushall >/dev/null
    clock=$(clock_ms)
    awk -v c="$clock" 'BEGIN {
        for (i = 0; i < 45000; i++) { t = c - 3590000 + int(i * 3529000 / 45000); printf "ZADD mw:swl %.0f %d\r\nZADD mw:fn %.0f %d\r\n", t, i, t, i }
        for (i = 0; i < 4900; i++) { t = c - 59000 + int(i * 58000 / 4900); printf "ZADD mw:swl %.0f m%d\r\nZADD mw:fn %.0f m%d\r\n", t, i, t, i }
    }' | pipe_commands
    cli config resetstat >/dev/null
    redis-benchmark -p "$port" -c 1 -P "$PIPELINE" -n "$calls" SWL.CHECK mw:swl 3600000 100000 '*' WINDOW 60000 5000 >/dev/null
    redis-benchmark -p "$port" -c 1 -P "$PIPELINE" -n "$calls" FCALL swl_check 1 mw:fn 3600000 100000 '*' WINDOW 60000 5000 >/dev/null
    local swl library
    swl=$(usec_per_call swl.check)
    library=$(usec_per_call fcall)
    printf '%-34s %10s %10s %10s\n' "hour/100,000 + minute/5,000" "$swl" "$library" "$(ratio "$library" "$swl")"
    # The same entries as a compact log of each format version, written
    # by the module and copied to the library's key.
    local encoding
    for encoding in compact1 compact; do
        cli config set swl.encoding "$encoding" >/dev/null
        awk -v c="$clock" -v k="mw:c$encoding" 'BEGIN {
            for (i = 0; i < 45000; i++) printf "SWL.CHECK %s 3600000 1000000000 %.0f\r\n", k, c - 3590000 + int(i * 3529000 / 45000)
            for (i = 0; i < 4900; i++) printf "SWL.CHECK %s 3600000 1000000000 %.0f\r\n", k, c - 59000 + int(i * 58000 / 4900)
        }' | pipe_commands
        load_library "$encoding"
        cli copy "mw:c$encoding" "mw:f$encoding" >/dev/null
        cli config resetstat >/dev/null
        redis-benchmark -p "$port" -c 1 -P "$PIPELINE" -n "$calls" SWL.CHECK "mw:c$encoding" 3600000 100000 '*' WINDOW 60000 5000 >/dev/null
        # redis-benchmark stops at an error reply, which call_time reports.
        redis-benchmark -p "$port" -c 1 -P "$PIPELINE" -n "$calls" FCALL swl_check 1 "mw:f$encoding" 3600000 100000 '*' WINDOW 60000 5000 >/dev/null 2>&1 || true
        swl=$(call_time swl.check)
        library=$(call_time fcall)
        printf '%-34s %10s %10s %10s\n' "the same, $encoding ($(format_of "mw:c$encoding")) logs" "$swl" "$library" "$(ratio "$library" "$swl")"
    done
    cli config set swl.encoding zset >/dev/null
    load_library zset
}

# The times of 10,000 requests in one of the arrival patterns a compact
# format is judged by, in the order they arrive, one a line: Poisson
# arrivals at `rate`
# per second (poisson:RATE), steady (one a second), bursts (50 in one
# millisecond, a second apart), or a client 2 s behind (one call in ten
# dated 2,000 ms before the newest, the rest Poisson at 1/s).
arrivals() {
    awk -v pattern="$1" -v n=10000 -v b=1700000000000 'BEGIN {
        srand(11); t = b; split(pattern, p, ":")
        for (i = 0; i < n; i++) {
            if (p[1] == "poisson") { t += -log(1 - rand()) * 1000 / p[2]; printf "%.0f\n", int(t) }
            else if (p[1] == "steady") printf "%.0f\n", b + 1000 * i
            else if (p[1] == "bursts") printf "%.0f\n", b + 1000 * int(i / 50)
            else if (i % 10 == 9) printf "%.0f\n", int(t) - 2000
            else { t += -log(1 - rand()) * 1000; printf "%.0f\n", int(t) }
        }
    }'
}

# The bytes per request format version 2 is to reach by pattern: fixed
# for Poisson arrivals; for the others, no more than version 1's
# (`v1`, measured in the same run).
v2_target() {
    case "$1" in
        poisson:0.1) echo 2.5 ;;
        poisson:1) echo 2.0 ;;
        poisson:10) echo 1.5 ;;
        poisson:100) echo 1.2 ;;
        *) echo "$2" ;;
    esac
}

# Bytes per tracked request (MEMORY USAGE / entries) of one log of 10,000
# entries recorded by SWL.CHECK in the order a client sends them (the
# "behind" pattern out of order one call in ten), every call admitted, in
# a sorted set (swl.encoding zset), a compact log of format version 1
# (compact1) and one of version 2 (compact); limits' LIST of the same
# requests (float seconds, as limits stores time.time()); and the
# information bound, log2 C(S + n, n) bits for n times over a span of S ms.
# Each log is checked to hold its 10,000 entries in the format named.
memory_patterns() {
    local pattern times encoding problems=()
    printf '%-12s %10s %10s %10s %10s %10s %10s %6s\n' pattern "sorted set" "v1" "v2" "limits" bound "v2 target" "met"
    for pattern in poisson:0.1 poisson:1 poisson:10 poisson:100 steady bursts behind; do
        cli flushall >/dev/null
        times=$(arrivals "$pattern")
        for encoding in zset compact1 compact; do
            cli config set swl.encoding "$encoding" >/dev/null
            echo "$times" | awk -v k="mp:$encoding" '{ printf "SWL.CHECK %s 1000000000000 1000000000000 %s\r\n", k, $1 }' | pipe_commands
            local entries format
            entries=$(cli swl.entries "mp:$encoding" | wc -l)
            format=$(format_of "mp:$encoding")
            if [ "$entries" -ne 10000 ] || [ "$format" != "$(format_written_by "$encoding")" ]; then
                problems+=("$pattern: mp:$encoding holds $entries entries, format $format")
            fi
        done
        cli config set swl.encoding zset >/dev/null
        echo "$times" | awk '{ printf "LPUSH mp:list %.6f\r\n", $1 / 1000 + 0.000123 }' | pipe_commands
        local zset v1 v2 list bound target
        zset=$(cli memory usage mp:zset samples 0)
        v1=$(cli memory usage mp:compact1 samples 0)
        v2=$(cli memory usage mp:compact samples 0)
        list=$(cli memory usage mp:list samples 0)
        bound=$(echo "$times" | sort -n | awk 'NR == 1 { first = $1 } { last = $1 } END {
            n = NR; s = last - first + 1; bits = 0
            for (i = 1; i <= n; i++) bits += log((s + i) / i) / log(2)
            printf "%.2f", bits / 8 / n }')
        per() { awk -v m="$1" 'BEGIN { printf "%.2f", m / 10000 }'; }
        target=$(v2_target "$pattern" "$(per "$v1")")
        printf '%-12s %10s %10s %10s %10s %10s %10s %6s\n' "$pattern" "$(per "$zset")" "$(per "$v1")" "$(per "$v2")" \
            "$(per "$list")" "$bound" "<= $target" "$(at_most "$(per "$v2")" "$target")"
    done
    echo "(v1: swl.encoding compact1, format version 1; v2: swl.encoding compact, format version 2; targets for v2: Poisson as shown, the others no more than v1)"
    if [ "${#problems[@]}" -gt 0 ]; then printf 'NOT AS BUILT: %s\n' "${problems[@]}"; fi
}

# Two windows (an hour and a minute, limits nothing reaches) on logs of
# 100 to 100,000 entries spread over the hour, a twentieth in the last
# minute: server microseconds per check, module and library, in a sorted
# set and in compact logs of format version 1 (compact1) and 2 (compact),
# the library loaded with the same ENCODING. Every check admits and adds
# an entry, so the checks run on a fresh copy of the log as built every
# n/10 checks: each sees n to 1.1 n entries. The server's speed drifts on
# a shared machine, so the encodings run in turn, CURVE_ROUNDS times, and
# each figure is the median of its rounds. Flat in the size of the log is
# the target, read as at most 1.25 times the time at 100 entries at
# 100,000; and the library no slower on a compact log than on a sorted set.
CURVE_ROUNDS=${BENCH_CURVE_ROUNDS:-5}
two_window_curve() {
    local n encoding clock calls=5000 batch round
    local -A module_us library_us
    printf '%-10s %-9s %-7s %10s %10s %10s\n' entries encoding format SWL.CHECK swl.lua "vs swl.lua"
    checks() {
        awk -v tpl="$1" -v key="$2" -v cmd="$3" -v batch="$batch" -v calls="$calls" 'BEGIN {
            for (j = 0; j < calls; j++) {
                if (j % batch == 0) printf "COPY %s %s REPLACE\r\n", tpl, key
                printf "%s %s 3600000 1000000000000 * WINDOW 60000 1000000000000\r\n", cmd, key
            }
        }'
    }
    for n in 100 1000 10000 100000; do
        batch=$((n / 10 < calls ? n / 10 : calls))
        cli flushall >/dev/null
        clock=$(clock_ms)
        for encoding in zset compact1 compact; do
            cli config set swl.encoding "$encoding" >/dev/null
            awk -v c="$clock" -v n="$n" -v k="tw:tpl:$encoding" 'BEGIN {
                old = n - int(n / 20)
                for (i = 0; i < old; i++) printf "SWL.CHECK %s 3600000 1000000000000 %.0f\r\n", k, c - 3590000 + int(i * 3529000 / old)
                for (i = 0; i < n - old; i++) printf "SWL.CHECK %s 3600000 1000000000000 %.0f\r\n", k, c - 59000 + int(i * 58000 / (n - old))
            }' | pipe_commands
        done
        local rounds=()
        for round in $(seq 1 "$CURVE_ROUNDS"); do
            for encoding in zset compact1 compact; do
                cli config set swl.encoding "$encoding" >/dev/null
                load_library "$encoding"
                cli config resetstat >/dev/null
                checks "tw:tpl:$encoding" tw:m SWL.CHECK | pipe_measured
                checks "tw:tpl:$encoding" tw:l "FCALL swl_check 1" | pipe_measured
                rounds+=("$encoding $(call_time swl.check) $(call_time fcall)")
            done
        done
        for encoding in zset compact1 compact; do
            module_us[$n:$encoding]=$(printf '%s\n' "${rounds[@]}" | awk -v e="$encoding" '$1 == e { print $2 }' | median)
            library_us[$n:$encoding]=$(printf '%s\n' "${rounds[@]}" | awk -v e="$encoding" '$1 == e { print $3 }' | median)
            printf '%-10s %-9s %-7s %10s %10s %10s\n' "$n" "$encoding" "$(format_of "tw:tpl:$encoding")" "${module_us[$n:$encoding]}" \
                "${library_us[$n:$encoding]}" "$(ratio "${library_us[$n:$encoding]}" "${module_us[$n:$encoding]}")"
        done
    done
    local flat=() versus=()
    for encoding in zset compact1 compact; do
        local m l
        m=$(ratio "${module_us[100000:$encoding]}" "${module_us[100:$encoding]}")
        l=$(ratio "${library_us[100000:$encoding]}" "${library_us[100:$encoding]}")
        flat+=("$encoding: module $m ($(at_most "$m" 1.25)), swl.lua $l ($(at_most "$l" 1.25))")
    done
    for encoding in compact1 compact; do
        local row="$encoding:"
        for n in 100 1000 10000 100000; do
            local r
            r=$(ratio "${library_us[$n:$encoding]}" "${library_us[$n:zset]}")
            row+=" at $n $r ($(at_most "$r" 1)),"
        done
        versus+=("${row%,}")
    done
    echo "100,000 entries vs 100 (target: flat, read as <= 1.25):"
    printf '  %s\n' "${flat[@]}"
    echo "swl.lua on a compact log vs swl.lua on a sorted set, the same entries (target <= 1):"
    printf '  %s\n' "${versus[@]}"
    cli config set swl.encoding zset >/dev/null
    load_library zset
}

# The most expensive single calls, on a log of 100,001 entries (one a
# millisecond) in each encoding: a sorted set, a compact log of format
# version 1 (compact1) and one of version 2 (compact), server
# microseconds per call (the median of several). The module's calls, then
# the function library's on a copy of each log, loaded with the same
# ENCODING; where a new log the library made is not in the format its
# column names, the cell says which it wrote.
worst_cases() {
    local n=100001 base=1700000000000 encoding
    local encodings=(zset compact1 compact)
    cli flushall >/dev/null
    awk -v n="$n" -v b="$base" 'BEGIN { for (i = 0; i < n; i++) printf "ZADD wc:zset %.0f %d\r\n", b + i, i }' | pipe_commands
    for encoding in compact1 compact; do
        cli config set swl.encoding "$encoding" >/dev/null
        awk -v n="$n" -v b="$base" -v k="wc:$encoding" 'BEGIN { for (i = 0; i < n; i++) printf "SWL.CHECK %s 100000000 100000000 %.0f\r\n", k, b + i }' | pipe_commands
    done
    for encoding in "${encodings[@]}"; do cli copy "wc:$encoding" "fwc:$encoding" >/dev/null; done
    local now=$((base + n - 1)) max=9007199254740991 same=() spread=() i
    # The case that took 11 s before counts were O(log N): 100 windows
    # (the first and 99 WINDOW clauses, the most a call may have) of 1,000
    # entries each, under limits nothing reaches.
    for i in $(seq 1 99); do same+=(WINDOW 1000 "$max"); done
    # 100 windows of different widths, each full, so each denies and
    # looks up the entry it waits for in the middle of the log.
    for i in $(seq 1 99); do spread+=(WINDOW $((1000 + i * 970)) $((500 + i * 400))); done
    printf '%-40s %12s %16s %16s\n' call "sorted set" "compact1 (v1)" "compact (v2)"
    local cells
    row() { printf '%-40s %12s %16s %16s\n' "$1" "${cells[@]}"; }
    # Each cell runs with swl.encoding and the library's ENCODING set to
    # its column's: `measure` is called with the encoding.
    each() {
        local label=$1 measure=$2
        cells=()
        for encoding in "${encodings[@]}"; do
            cli config set swl.encoding "$encoding" >/dev/null
            load_library "$encoding"
            cells+=("$("$measure" "$encoding")")
        done
        row "$label"
    }
    peek() { timed 10 SWL.PEEK "wc:$1" 100000 "$max" "$now" "${same[@]}"; }
    deny() { timed 10 SWL.CHECK "wc:$1" 100000 "$max" "$now" "${spread[@]}"; }
    # The largest cost, admitted: 100,000 entries written in one call on
    # a new log; then, on the same logs, the largest refund, 99,999 of
    # them given back in one call.
    cost() { timed 5 SWL.CHECK "cost:$1:{i}" 60000 100000 '*' COST 100000; }
    refund() { timed 5 SWL.REFUND "cost:$1:{i}" 60000 100000 '*' COST 99999; }
    # Times going backwards: each entry before all 100,001 (a sorted set
    # takes it in O(log N); version 1 moves every slot and propagates the
    # moved bytes, or writes the value anew before its base; version 2
    # codes the blocks anew from the one it goes into).
    older() {
        local command=$2 stat=$3 key=$4 repeat=$5
        for i in $(seq 1 "$repeat"); do
            cli config resetstat >/dev/null
            $command "$key" 100000000 100000000 "$((base - i))" >/dev/null
            call_time "$stat"
        done | median
    }
    older_module() { older "$1" "cli swl.check" swl.check "wc:$1" 20; }
    fpeek() { timed 10 FCALL swl_peek 1 "fwc:$1" 100000 "$max" "$now" "${same[@]}"; }
    fdeny() { timed 10 FCALL swl_check 1 "fwc:$1" 100000 "$max" "$now" "${spread[@]}"; }
    # The library's costliest call on a sorted set: COST 100,000 is
    # 100,000 entries added from Lua.
    fcost() {
        local time format
        time=$(timed 5 FCALL swl_check 1 "fcost:$1:{i}" 60000 100000 '*' COST 100000)
        format=$(format_of "fcost:$1:1")
        if [ "$format" = "$(format_written_by "$1")" ]; then echo "$time"; else echo "$time (wrote $format)"; fi
    }
    older_library() { older "$1" "cli fcall swl_check 1" fcall "fwc:$1" 5; }
    each "SWL.PEEK, 100 x (1000 ms, 2^53-1)" peek
    each "SWL.CHECK, 100 denying windows" deny
    each "SWL.CHECK, COST 100,000, a new log" cost
    each "SWL.REFUND, COST 99,999 of 100,000" refund
    each "SWL.CHECK, an entry older than all" older_module
    each "FCALL swl_peek, 100 x (1000 ms, 2^53-1)" fpeek
    each "FCALL swl_check, 100 denying windows" fdeny
    each "FCALL swl_check, COST 100,000, new log" fcost
    each "FCALL swl_check, entry older than all" older_library
    cli config set swl.encoding zset >/dev/null
    load_library zset
}

# The compact encoding against its targets, on the throughput workloads:
# an admitted check at most ZADD + PEXPIREAT of server time, a denied one
# at most ZADD, and at least 4x the usual script's throughput.
compact_speed() {
    local name=$1 keyspace=$2 limit=$3
    cli flushall >/dev/null
    cli config resetstat >/dev/null
    local zadd lua swl library
    zadd=$(rps "$keyspace" ZADD "zadd:$name:__rand_int__" 1 m)
    rps "$keyspace" PEXPIREAT "zadd:$name:__rand_int__" 9999999999999 >/dev/null
    lua=$(rps "$keyspace" EVALSHA "$sha" 1 "lua:$name:__rand_int__" 60000 "$limit")
    cli config set swl.encoding compact >/dev/null
    load_library compact
    swl=$(rps "$keyspace" SWL.CHECK "cpt:$name:__rand_int__" 60000 "$limit" '*')
    library=$(rps "$keyspace" FCALL swl_check 1 "fcpt:$name:__rand_int__" 60000 "$limit" '*')
    cli config set swl.encoding zset >/dev/null
    load_library zset
    local zadd_us pexpireat_us swl_us both_us library_us
    zadd_us=$(usec_per_call zadd)
    pexpireat_us=$(usec_per_call pexpireat)
    swl_us=$(usec_per_call swl.check)
    library_us=$(call_time fcall)
    both_us=$(awk -v a="$zadd_us" -v b="$pexpireat_us" 'BEGIN { printf "%.2f", a + b }')
    printf '%-10s %10.0f %10.0f %10s %10s %10s %10s %10s %10s\n' "$name" "$swl" "$lua" "$(ratio "$swl" "$lua")" \
        "$swl_us" "$zadd_us" "$both_us" "$(ratio "$zadd_us" "$swl_us")" "$(ratio "$both_us" "$swl_us")"
    library_compact+=("$(printf '%-10s %10.0f %10.0f %10s %10s %10s %10s' "$name" "$library" "$swl" "$(ratio "$swl" "$library")" \
        "$library_us" "$swl_us" "$(ratio "$library_us" "$swl_us")")")
}

# One-window SWL.CHECK on compact logs of format version 2 (swl.encoding
# compact) beside version 1 (compact1), on the throughput workloads: the
# two run in turn FORMAT_ROUNDS times, each on logs it made, and each
# figure is the median of its rounds' server time per call. Target:
# version 2 at most 1.1 times version 1.
FORMAT_ROUNDS=${BENCH_FORMAT_ROUNDS:-3}
format_speed() {
    local name=$1 keyspace=$2 limit=$3 round encoding rounds=() formats=()
    for round in $(seq 1 "$FORMAT_ROUNDS"); do
        for encoding in compact1 compact; do
            cli flushall >/dev/null
            cli config set swl.encoding "$encoding" >/dev/null
            cli config resetstat >/dev/null
            rps "$keyspace" SWL.CHECK "fs:$name:__rand_int__" 60000 "$limit" '*' >/dev/null
            rounds+=("$encoding $(call_time swl.check)")
            formats+=("$encoding $(format_of "$(cli randomkey)")")
        done
    done
    cli config set swl.encoding zset >/dev/null
    local v1 v2 r
    v1=$(printf '%s\n' "${rounds[@]}" | awk '$1 == "compact1" { print $2 }' | median)
    v2=$(printf '%s\n' "${rounds[@]}" | awk '$1 == "compact" { print $2 }' | median)
    r=$(ratio "$v2" "$v1")
    printf '%-10s %10s %10s %10s %10s %6s\n' "$name" "$v1" "$v2" "$r" "<= 1.1" "$(at_most "$r" 1.1)"
    # The logs each setting made, in the format it names.
    printf '%s\n' "${formats[@]}" | sort -u | while read -r encoding format; do
        [ "$format" = "$(format_written_by "$encoding")" ] || echo "NOT AS BUILT: swl.encoding $encoding made a log of format $format"
    done
}

format_speeds() {
    printf '%-10s %10s %10s %10s %10s %6s\n' workload "v1 us" "v2 us" "v2/v1" target met
    format_speed admitted 100000 1000   # many fresh keys, nearly all admitted
    format_speed denied 10 10           # ten hot keys at their limit, nearly all denied
}

# Where the time of one workload goes (server microseconds per call): the
# call, the commands it issued per call and their own time, and the rest,
# which for a script or function is the Lua around those commands.
breakdown() {
    local label=$1 keyspace=$2 command=$3
    shift 3
    cli flushall >/dev/null
    cli config resetstat >/dev/null
    rps "$keyspace" "$@" >/dev/null
    cli info commandstats | tr -d '\r' | awk -F'[:=,]' -v top="cmdstat_$command" -v label="$label" '
        $1 == top { calls = $3; usec = $5; failed = $9 + $11; next }
        $1 ~ /^cmdstat_/ && $1 != "cmdstat_config|resetstat" { inner += $3; inner_usec += $5 }
        END {
            if (failed > 0) label = "FAILED " label
            printf "%-30s %10.2f %10.2f %10.2f %10.2f\n", label, usec / calls, inner / calls, inner_usec / calls, (usec - inner_usec) / calls
        }'
}

# The commands a one-window call of the library issues and the reply it
# returns, with no more Lua around them than the usual script has (its
# decision, by the count): a function per encoding that admits as the
# library does on a log it has already written (a count of later entries
# after the ZADD, on a sorted set) and denies as it does (on a sorted set,
# the entry the wait is for and the newest, then the expiry, and a key
# denied the call before, still full with nothing to trim, read before the
# trim, which is then not sent; on a compact log, the expiry), passing
# arguments as text as the library does, and
# replies six integers as the library does. What these cost over the
# script is the share of the commands and the reply; what the library
# costs over these is its Lua's.
FLOOR='#!lua name=swl_floor
local function clock()
  local t = redis.call("TIME")
  local seconds, micros = t[1] + 0, t[2] + 0
  return seconds * 1000 + (micros - micros % 1000) / 1000, micros
end
local denied_last = {}
local function zset_floor(keys, args)
  local now, micros = clock()
  local window, limit = tonumber(args[1]), tonumber(args[2])
  if denied_last[keys[1]] then
    local before = redis.call("ZRANGE", keys[1], string.format("%d", -limit - 1), string.format("%d", -limit), "WITHSCORES")
    if #before == 2 and before[2] + 0 > now - window then
      redis.call("ZRANGE", keys[1], "-1", "-1", "WITHSCORES")
      redis.call("PEXPIRETIME", keys[1])
      return { 0, limit, 0, 1, 1, window }
    end
  end
  redis.call("ZREMRANGEBYSCORE", keys[1], "-inf", string.format("%d", now - window))
  local count = redis.call("ZCARD", keys[1])
  if count < limit then
    denied_last[keys[1]] = nil
    local at = string.format("%d", now)
    redis.call("ZADD", keys[1], "NX", at, string.format("%d", 10000000000000 + micros * 1000))
    redis.call("ZCOUNT", keys[1], "(" .. at, "+inf")
    redis.call("PEXPIRE", keys[1], args[1])
    return { 1, limit, limit - count - 1, -1, window, window }
  end
  denied_last[keys[1]] = true
  local rank = string.format("%d", count - limit)
  redis.call("ZRANGE", keys[1], rank, rank, "WITHSCORES")
  redis.call("ZRANGE", keys[1], "-1", "-1", "WITHSCORES")
  redis.call("PEXPIRETIME", keys[1])
  return { 0, limit, 0, 1, 1, window }
end
local function compact_floor(keys, args)
  local now = clock()
  local window, limit = tonumber(args[1]), tonumber(args[2])
  local value = redis.call("GETRANGE", keys[1], "0", "1023")
  if #value / 4 < limit then
    redis.call("SETRANGE", keys[1], string.format("%d", #value), "slot")
    redis.call("PEXPIRE", keys[1], args[1])
    return { 1, limit, limit - #value / 4 - 1, -1, window, window }
  end
  redis.call("PEXPIRETIME", keys[1])
  return { 0, limit, 0, 1, 1, window }
end
redis.register_function("zset_floor", zset_floor)
redis.register_function("compact_floor", compact_floor)'

# One round of the one-window workloads below, a row each.
library_round() {
    breakdown "script, admitted" 100000 evalsha EVALSHA "$sha" 1 "b:__rand_int__" 60000 1000
    breakdown "script, denied" 10 evalsha EVALSHA "$sha" 1 "b:__rand_int__" 60000 10
    breakdown "swl.lua sorted set, admitted" 100000 fcall FCALL swl_check 1 "b:__rand_int__" 60000 1000 '*'
    breakdown "swl.lua sorted set, denied" 10 fcall FCALL swl_check 1 "b:__rand_int__" 60000 10 '*'
    load_library compact1
    breakdown "swl.lua compact1, admitted" 100000 fcall FCALL swl_check 1 "b:__rand_int__" 60000 1000 '*'
    breakdown "swl.lua compact1, denied" 10 fcall FCALL swl_check 1 "b:__rand_int__" 60000 10 '*'
    load_library compact
    breakdown "swl.lua compact, admitted" 100000 fcall FCALL swl_check 1 "b:__rand_int__" 60000 1000 '*'
    breakdown "swl.lua compact, denied" 10 fcall FCALL swl_check 1 "b:__rand_int__" 60000 10 '*'
    load_library zset
    breakdown "its commands, sorted set, adm." 100000 fcall FCALL zset_floor 1 "b:__rand_int__" 60000 1000
    breakdown "its commands, sorted set, den." 10 fcall FCALL zset_floor 1 "b:__rand_int__" 60000 10
    breakdown "its commands, compact, adm." 100000 fcall FCALL compact_floor 1 "b:__rand_int__" 60000 1000
    breakdown "its commands, compact, den." 10 fcall FCALL compact_floor 1 "b:__rand_int__" 60000 10
}

# The function library against the usual script on the one-window
# workloads, with where each spends its time: on sorted sets, and on the
# compact logs it writes loaded with ENCODING 'compact1' (format version
# 1) and 'compact' (version 2, once this swl.lua writes it:
# library_formats says). The server's speed drifts on a shared machine,
# so the workloads run in turn, LIBRARY_ROUNDS times, and each shows the
# round of its median time per call.
LIBRARY_ROUNDS=${BENCH_LIBRARY_ROUNDS:-3}
library_cost() {
    local rounds=() round
    for round in $(seq 1 "$LIBRARY_ROUNDS"); do rounds+=("$(library_round)"); done
    local rows=() i
    for i in $(seq 1 "$(echo "${rounds[0]}" | wc -l)"); do
        rows+=("$(for round in "${rounds[@]}"; do echo "$round" | sed -n "${i}p"; done |
            awk '{ print $(NF - 3) "\t" $0 }' | sort -n | awk -F'\t' -v n="$LIBRARY_ROUNDS" 'NR == int((n + 1) / 2) { print $2 }')")
    done
    printf '%-30s %10s %10s %10s %10s\n' workload "us/call" "cmds/call" "cmds us" "Lua us"
    printf '%s\n' "${rows[@]}"
    local per_call=()
    local row
    for row in "${rows[@]}"; do per_call+=("$(echo "$row" | awk '{ print $(NF - 3) }')"); done
    vs() { local r; r=$(ratio "$1" "$2"); echo "$r ($(at_most "$r" "$3"))"; }
    printf 'swl.lua vs script: sorted set admitted %s, denied %s (targets <= 1.3, <= 2)\n' \
        "$(vs "${per_call[2]}" "${per_call[0]}" 1.3)" "$(vs "${per_call[3]}" "${per_call[1]}" 2)"
    printf '  compact1 admitted %s, denied %s; compact admitted %s, denied %s (targets <= 1.6, <= 2)\n' \
        "$(vs "${per_call[4]}" "${per_call[0]}" 1.6)" "$(vs "${per_call[5]}" "${per_call[1]}" 2)" \
        "$(vs "${per_call[6]}" "${per_call[0]}" 1.6)" "$(vs "${per_call[7]}" "${per_call[1]}" 2)"
    printf 'swl.lua compact vs compact1: admitted %s, denied %s\n' \
        "$(ratio "${per_call[6]}" "${per_call[4]}")" "$(ratio "${per_call[7]}" "${per_call[5]}")"
    printf 'its commands and reply alone vs script: sorted set admitted %s, denied %s; compact admitted %s, denied %s\n' \
        "$(ratio "${per_call[8]}" "${per_call[0]}")" "$(ratio "${per_call[9]}" "${per_call[1]}")" \
        "$(ratio "${per_call[10]}" "${per_call[0]}")" "$(ratio "${per_call[11]}" "${per_call[1]}")"
}

# SWL.REFUND beside SWL.CHECK on the same keys, in one encoding: checks
# of COST 2 on 100,000 keys, then refunds of one unit on them; the same
# through the function library.
refund_speed() {
    local encoding=$1 check_us refund_us fcheck_us frefund_us
    cli flushall >/dev/null
    cli config set swl.encoding "$encoding" >/dev/null
    load_library "$encoding"
    cli config resetstat >/dev/null
    rps 100000 SWL.CHECK "rf:__rand_int__" 60000 1000 '*' COST 2 >/dev/null
    rps 100000 SWL.REFUND "rf:__rand_int__" 60000 1000 '*' >/dev/null
    check_us=$(usec_per_call swl.check)
    refund_us=$(usec_per_call swl.refund)
    cli config resetstat >/dev/null
    rps 100000 FCALL swl_check 1 "frf:__rand_int__" 60000 1000 '*' COST 2 >/dev/null
    fcheck_us=$(call_time fcall)
    cli config resetstat >/dev/null
    rps 100000 FCALL swl_refund 1 "frf:__rand_int__" 60000 1000 '*' >/dev/null
    frefund_us=$(call_time fcall)
    cli config set swl.encoding zset >/dev/null
    load_library zset
    printf '%-10s %12s %12s %12s %14s %14s %12s\n' "$encoding" "$check_us" "$refund_us" "$(ratio "$check_us" "$refund_us")" \
        "$fcheck_us" "$frefund_us" "$(ratio "$frefund_us" "$refund_us")"
}

# One call on a fresh copy of the compact log `template`, by the module
# (SWL.CHECK) or the function library (FCALL swl_check), BENCH_ONE_ROUNDS
# times: the median server milliseconds of the call, or "failed".
ONE_ROUNDS=${BENCH_ONE_ROUNDS:-3}
one_call_ms() {
    local via=$1 template=$2 i stat
    shift 2
    stat=swl.check
    [ "$via" = library ] && stat=fcall
    for i in $(seq 1 "$ONE_ROUNDS"); do
        cli copy "$template" one:call replace >/dev/null
        cli config resetstat >/dev/null
        if [ "$via" = module ]; then
            cli swl.check one:call "$@" >/dev/null
        else
            cli fcall swl_check 1 one:call "$@" >/dev/null
        fi
        call_time "$stat"
    done | median | awk '$1 ~ /^[0-9.]+$/ { printf "%.2f", $1 / 1000; next } { print }'
}

REWRITE_ROW='%-36s %9s %10s %10s %7s %11s %11s%s\n'

# The row of one call on the compact logs of `n` entries of both format
# versions (`kind`:compact1:n and `kind`:compact:n), module and library,
# each with swl.encoding and the library's ENCODING set to the log's
# encoding. Where `grows` is given, a module's call that left the value
# no longer is marked: the row is not measuring what it says.
rewrite_row() {
    local label=$1 n=$2 kind=$3 grows=$4 encoding cells=() marks=""
    shift 4
    for encoding in compact1 compact; do
        cli config set swl.encoding "$encoding" >/dev/null
        load_library "$encoding"
        cells+=("$(one_call_ms module "$kind:$encoding:$n" "$@")")
        if [ "$grows" = grows ] && [ "$(cli strlen one:call)" -le "$(cli strlen "$kind:$encoding:$n")" ]; then
            marks+=" (the $(format_written_by "$encoding") log did not grow)"
        fi
        cells+=("$(one_call_ms library "$kind:$encoding:$n" "$@")")
    done
    # shellcheck disable=SC2059
    printf "$REWRITE_ROW" "$label" "$n" "${cells[0]}" "${cells[2]}" "$(ratio "${cells[2]}" "${cells[0]}")" \
        "${cells[1]}" "${cells[3]}" "$marks"
}

# Adds `count` entries at `time` to the compact log `key`, COST 100,000
# at most a call.
add_entries() {
    local key=$1 time=$2 left=$3 cost
    while [ "$left" -gt 0 ]; do
        cost=$((left < 100000 ? left : 100000))
        cli swl.check "$key" 1000000000000000 1000000000000000 "$time" COST "$cost" >/dev/null
        left=$((left - cost))
    done
}

# Compact logs of `n` entries, one a millisecond from `base`, made by the
# module under swl.encoding `encoding` (compact1: format version 1;
# compact: version 2): tpl:ENCODING:n as made (its spare room at the
# end), and unless `full` is "no", full:ENCODING:n with that room filled
# by entries at the newest time: the most the value takes without
# growing, found by bisection on copies (the room is a count of slots in
# version 1, bits in blocks in version 2).
compact_templates() {
    local n=$1 base=$2 encoding=$3 full=${4:-yes}
    local tpl="tpl:$encoding:$n" newest=$((base + n - 1))
    cli config set swl.encoding "$encoding" >/dev/null
    awk -v n="$n" -v b="$base" -v k="$tpl" 'BEGIN { for (i = 0; i < n; i++) printf "SWL.CHECK %s 1000000000000000 1000000000000000 %.0f\r\n", k, b + i }' | pipe_commands
    [ "$full" = no ] && return 0
    local len low=0 high=1 mid
    len=$(cli strlen "$tpl")
    fits() {
        cli copy "$tpl" fill:probe replace >/dev/null
        add_entries fill:probe "$newest" "$1"
        [ "$(cli strlen fill:probe)" -eq "$len" ]
    }
    while fits "$high"; do low=$high; high=$((high * 2)); done
    while [ $((high - low)) -gt 1 ]; do
        mid=$(((low + high) / 2))
        if fits "$mid"; then low=$mid; else high=$mid; fi
    done
    cli copy "$tpl" "full:$encoding:$n" replace >/dev/null
    add_entries "full:$encoding:$n" "$newest" "$low"
    cli del fill:probe >/dev/null
}

# The calls that rewrite much of a large compact log, module against
# library, in both format versions, at 100,000 and 1,000,000 entries. In
# version 1 each copies bytes, but for an entry older than the base (a
# time the slots cannot hold), which makes the value anew from its times
# (O(N) in Lua); in version 2 growth and reclaiming dead blocks copy
# bytes, and a time older than the newest codes the blocks anew from the
# one it goes into (an entry older than all: every block).
compact_rewrites() {
    local base=1700000000000 big=1000000000000000 n encoding
    cli flushall >/dev/null
    # shellcheck disable=SC2059
    printf "$REWRITE_ROW" call entries "module v1" "module v2" "v2/v1" "swl.lua v1" "swl.lua v2" ""
    for n in 100000 1000000; do
        for encoding in compact1 compact; do compact_templates "$n" "$base" "$encoding"; done
        local newest=$((base + n - 1))
        rewrite_row "trim past half (70% trimmed)" "$n" tpl - $((n * 3 / 10)) "$big" $((newest + 1))
        rewrite_row "growth (a full log, COST 1)" "$n" full grows "$big" "$big" $((newest + 1))
        rewrite_row "COST 100000 past the spare room" "$n" full grows "$big" "$big" $((newest + 1)) COST 100000
        rewrite_row "a client 10 s behind the newest" "$n" tpl - "$big" "$big" $((newest - 10000))
        rewrite_row "an entry 2 min older than all" "$n" tpl - "$big" "$big" $((base - 120000))
        # The Lua heap after the library's costliest call, that last one,
        # beside the value it wrote (the functions' heap is outside
        # maxmemory), in MB: heap/value.
        local heap=()
        for encoding in compact1 compact; do
            load_library "$encoding"
            cli copy "tpl:$encoding:$n" one:call replace >/dev/null
            cli config resetstat >/dev/null
            cli fcall swl_check 1 one:call "$big" "$big" $((base - 120000)) >/dev/null
            if [ "$(call_time fcall)" = failed ]; then
                heap+=(failed)
            else
                heap+=("$(cli info memory | tr -d '\r' | awk -F: '$1 == "used_memory_vm_functions" { printf "%.2f", $2 / 1048576 }')/$(cli strlen one:call | awk '{ printf "%.2f", $1 / 1048576 }')")
            fi
        done
        # shellcheck disable=SC2059
        printf "$REWRITE_ROW" "  Lua heap after it/value (MB)" "$n" "" "" "" "${heap[0]}" "${heap[1]}" ""
        for encoding in compact1 compact; do cli del "tpl:$encoding:$n" "full:$encoding:$n" >/dev/null; done
        cli del one:call >/dev/null
    done
    echo "(targets at 1,000,000 entries: swl.lua's trim, growth and COST rows at most 25 ms; the Lua heap under twice the value)"
    steady_large_logs
    cli config set swl.encoding zset >/dev/null
    load_library zset
}

# Steady traffic on 64 compact logs of 100,000 entries, in each format
# version: 20,000 one-window checks on random logs, now_ms one
# millisecond later each call, by the module on one set of logs and by
# the library on a copy; the worst call of each (INFO latencystats, its
# 100th percentile) and the median.
steady_large_logs() {
    local n=100000 base=1700000000000 i encoding
    local -A worst_ms median_ms
    cli config set latency-tracking-info-percentiles "50 99 100" >/dev/null
    calls() {
        awk -v b="$((base + n))" -v cmd="$1" 'BEGIN { srand(7); for (i = 1; i <= 20000; i++) printf "%s:%d 60000 1000000000000000 %.0f\r\n", cmd, int(rand() * 64), b + i }'
    }
    percentiles_ms() {
        if [ "$(call_time "$1")" = failed ]; then echo "failed failed"; return; fi
        cli info latencystats | tr -d '\r' | awk -F'[:=,]' -v c="latency_percentiles_usec_$1" \
            '$1 == c { printf "%.2f %.3f", $7 / 1000, $3 / 1000 }'
    }
    for encoding in compact1 compact; do
        compact_templates "$n" "$base" "$encoding" no
        load_library "$encoding"
        for i in $(seq 0 63); do
            cli copy "tpl:$encoding:$n" "steady:m:$i" replace >/dev/null
            cli copy "tpl:$encoding:$n" "steady:l:$i" replace >/dev/null
        done
        cli config resetstat >/dev/null
        calls "SWL.CHECK steady:m" | pipe_measured
        calls "FCALL swl_check 1 steady:l" | pipe_measured
        read -r "worst_ms[module:$encoding]" "median_ms[module:$encoding]" <<<"$(percentiles_ms swl.check)"
        read -r "worst_ms[library:$encoding]" "median_ms[library:$encoding]" <<<"$(percentiles_ms fcall)"
        for i in $(seq 0 63); do cli del "steady:m:$i" "steady:l:$i" >/dev/null; done
        cli del "tpl:$encoding:$n" >/dev/null
    done
    # shellcheck disable=SC2059
    printf "$REWRITE_ROW" "steady traffic, 64 logs: worst call" "$n" "${worst_ms[module:compact1]}" "${worst_ms[module:compact]}" \
        "$(ratio "${worst_ms[module:compact]}" "${worst_ms[module:compact1]}")" "${worst_ms[library:compact1]}" "${worst_ms[library:compact]}" ""
    # shellcheck disable=SC2059
    printf "$REWRITE_ROW" "  the median call" "$n" "${median_ms[module:compact1]}" "${median_ms[module:compact]}" \
        "$(ratio "${median_ms[module:compact]}" "${median_ms[module:compact1]}")" "${median_ms[library:compact1]}" "${median_ms[library:compact]}" ""
    echo "(target: no swl.lua call in the steady row over 10 ms)"
    cli config set latency-tracking-info-percentiles "50 99 99.9" >/dev/null
}

# The function library, creating new logs in the given encoding (its
# ENCODING line, as the README shows).
load_library() {
    sed "s/^local ENCODING = 'compact'\$/local ENCODING = '$1'/" scripts/swl.lua | cli -x function load replace >/dev/null
}

# What this scripts/swl.lua does with compact logs: the format version
# of a new log under each compact ENCODING, and whether it reads a log of
# format version 2 the module wrote. Its rows on compact logs measure what
# it writes and reads, which this says.
library_formats() {
    local encoding written=() reply
    cli del lf:new lf:v2 >/dev/null
    for encoding in compact1 compact; do
        load_library "$encoding"
        cli fcall swl_check 1 lf:new 60000 10 '*' >/dev/null
        written+=("ENCODING '$encoding' writes $(format_of lf:new)")
        cli del lf:new >/dev/null
    done
    cli config set swl.encoding compact >/dev/null
    cli swl.check lf:v2 60000 10 '*' >/dev/null
    cli config set swl.encoding zset >/dev/null
    reply=$(cli fcall swl_peek 1 lf:v2 60000 10 '*' | head -1)
    cli del lf:v2 >/dev/null
    load_library zset
    case "$reply" in
        0 | 1) reply="it reads a version 2 log" ;;
        *) reply="on a version 2 log the module wrote it replies: $reply" ;;
    esac
    echo "swl.lua here: ${written[0]}, ${written[1]}; $reply"
}

# Out-of-order arrivals. A window and a limit no log here reaches: nothing
# is trimmed and every call is admitted, unless a pattern says otherwise.
BIG=1000000000000

# The times of one arrival pattern, in the order they arrive, one a line,
# from t = 1700000000000 on, t advancing a second a call unless said:
#   inorder  24,000 calls, in order
#   hour     24,000 calls; every tenth from a client an hour behind
#            (now_ms = t - 3,600,000)
#   tenmin   24,000 calls, each 0 to 10 minutes behind (now_ms = t -
#            random(0..600,000), seeded)
#   crafted  the 4,000 in-order calls the crafted log starts from (the
#            inserts after them are chosen on the log: crafted_inserts)
#   ten, one 10 calls and 1, in order
#   servers  three application servers whose clocks are 30 ms apart
#            calling one key 100 times a second, in turn, for three
#            minutes (t advancing 10 ms a call: t, t - 30, t - 60
#            interleaved; 18,000 calls), under a one-minute window
pattern_times() {
    awk -v p="$1" -v b=1700000000000 'BEGIN {
        srand(5)
        if (p == "inorder") for (i = 0; i < 24000; i++) printf "%.0f\n", b + 1000 * i
        if (p == "hour") for (i = 0; i < 24000; i++) printf "%.0f\n", b + 3600000 + 1000 * i - (i % 10 == 9 ? 3600000 : 0)
        if (p == "tenmin") for (i = 0; i < 24000; i++) printf "%.0f\n", b + 600000 + 1000 * i - int(rand() * 600001)
        if (p == "crafted") for (i = 0; i < 4000; i++) printf "%.0f\n", b + 1000 * i
        if (p == "ten") for (i = 0; i < 10; i++) printf "%.0f\n", b + 1000 * i
        if (p == "one") printf "%.0f\n", b
        if (p == "servers") for (i = 0; i < 18000; i++) printf "%.0f\n", b + 10 * i - 30 * (i % 3)
    }'
}

# The window of a pattern's calls: a minute for the three servers.
pattern_window() { if [ "$1" = servers ]; then echo 60000; else echo "$BIG"; fi; }

# Inserts into a log of format version 2, each at 1 ms after the first
# time of a block in the middle (read with GETRANGE: a block's first time
# is its first 7 bytes, little-endian, blocks 256 bytes apart from byte
# 24): from a cursor over the blocks between the head block's and the
# last three, the next block of at least 16 entries; the cursor stays on
# a block while its inserts add blocks to the log, and moves on when one
# does not. ARGV: the inserts, the cursor, the window and limit of each.
# Replies the cursor, then the times inserted.
CRAFT='local key, count, cursor = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local big = ARGV[3]
local function u32(s)
  local a, b, c, d = string.byte(s, 1, 4)
  return a + b * 256 + c * 65536 + d * 16777216
end
local function block(i)
  local h = redis.call("GETRANGE", key, 24 + 256 * i, 24 + 256 * i + 13)
  local t = 0
  for j = 7, 1, -1 do t = t * 256 + string.byte(h, j) end
  return t, string.byte(h, 13) + string.byte(h, 14) * 256
end
local out = {}
for j = 1, count do
  local head = u32(redis.call("GETRANGE", key, 12, 15))
  local last = u32(redis.call("GETRANGE", key, 16, 19))
  if last - 3 < head + 1 then return redis.error_reply("too few blocks to craft in") end
  local first, n
  for step = 0, last do
    if cursor < head + 1 or cursor > last - 3 then cursor = head + 1 end
    first, n = block(cursor)
    if n >= 16 then break end
    cursor = cursor + 1
  end
  local at = string.format("%d", first + 1)
  redis.call("SWL.CHECK", key, big, big, at)
  out[#out + 1] = at
  if u32(redis.call("GETRANGE", key, 16, 19)) == last then cursor = cursor + 1 end
end
table.insert(out, 1, cursor)
return out'

CRAFTED_INSERTS=${BENCH_CRAFTED_INSERTS:-20000}

# The crafted inserts into the log `key` (format version 2), 1,000 a
# script call, their times appended to `file`.
crafted_inserts() {
    local key=$1 file=$2 cursor=1 done=0 chunk out
    : >"$file"
    while [ "$done" -lt "$CRAFTED_INSERTS" ]; do
        chunk=$((CRAFTED_INSERTS - done < 1000 ? CRAFTED_INSERTS - done : 1000))
        out=$(cli eval "$CRAFT" 1 "$key" "$chunk" "$cursor" "$BIG")
        cursor=$(echo "$out" | sed -n 1p)
        [[ "$cursor" =~ ^[0-9]+$ ]] || { echo "bench: crafting failed: $cursor" >&2; return 1; }
        echo "$out" | tail -n +2 >>"$file"
        done=$((done + chunk))
    done
}

# Records the times on stdin in the log `key` by SWL.CHECK (window
# `window`, a limit nothing reaches), in one pipelined connection, under
# the current swl.encoding.
record_times() {
    awk -v k="$1" -v w="$2" -v l="$BIG" '{ printf "SWL.CHECK %s %s %s %s\r\n", k, w, l, $1 }' | pipe_commands
}

# The log `key` built by SWL.CHECK under the arrival pattern, in the
# encoding `encoding`. The crafted log's inserts are chosen on a log of
# format version 2 (crafted_inserts, their times kept in
# $dir/crafted.times); in the other encodings the same times are replayed.
build_pattern() {
    local key=$1 pattern=$2 encoding=$3 window
    window=$(pattern_window "$pattern")
    cli config set swl.encoding "$encoding" >/dev/null
    pattern_times "$pattern" | record_times "$key" "$window"
    if [ "$pattern" = crafted ]; then
        if [ "$encoding" = compact ]; then
            if [ "$(format_of "$key")" = v2 ]; then
                crafted_inserts "$key" "$dir/crafted.times" || true
            else
                echo "bench: $key is not of format version 2 ($(format_of "$key")): no crafted inserts" >&2
                : >"$dir/crafted.times"
            fi
        else
            record_times "$key" "$window" <"$dir/crafted.times"
        fi
    fi
}

# The live entries a pattern leaves: with a window the log's width, the
# times after the last trim point (the latest now_ms less the window).
expected_entries() {
    local window
    window=$(pattern_window "$1")
    {
        pattern_times "$1"
        if [ "$1" = crafted ]; then cat "$dir/crafted.times"; fi
    } | awk -v w="$window" '{ t[NR] = $1; if ($1 > m) m = $1 }
        END { for (i = 1; i <= NR; i++) if (t[i] > m - w) n++; print n }'
}

PATTERN_ROW='%-44s %8s %10s %10s %11s %7s\n'

# 20000 as 20,000.
commas() { echo "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta'; }

# Bytes per live entry (MEMORY USAGE key SAMPLES 0 / the entries SWL.ENTRIES
# lists) of one log built by SWL.CHECK under each arrival pattern, in
# compact format version 2 (swl.encoding compact), version 1 (compact1)
# and a sorted set (zset). Each log is checked to hold the entries the
# pattern leaves, in the format named.
memory_arrivals() {
    local pattern encoding problems=()
    local -A labels=(
        [inorder]="1. in order, 1/s, 24,000"
        [hour]="2. a tenth an hour behind, 1/s, 24,000"
        [tenmin]="3. each 0-10 min behind, 1/s, 24,000"
        [crafted]="4. crafted: 4,000 in order + $(commas "$CRAFTED_INSERTS") inserts"
        [ten]="5. 10 entries, in order"
        [one]="6. 1 entry"
        [servers]="7. 3 servers 30 ms apart, 100/s, 1 min"
    )
    # shellcheck disable=SC2059
    printf "$PATTERN_ROW" pattern entries "format 2" "format 1" "sorted set" "v2/v1"
    for pattern in inorder hour tenmin crafted ten one servers; do
        cli flushall >/dev/null
        local -A per=()
        local entries="" expected
        for encoding in compact compact1 zset; do
            build_pattern "pa:$encoding" "$pattern" "$encoding"
        done
        expected=$(expected_entries "$pattern")
        for encoding in compact compact1 zset; do
            local n format bytes
            n=$(cli swl.entries "pa:$encoding" | grep -c '^[0-9]' || true)
            format=$(format_of "pa:$encoding")
            bytes=$(cli memory usage "pa:$encoding" samples 0)
            if [ "$n" -ne "$expected" ] || [ "$format" != "$(format_written_by "$encoding")" ]; then
                problems+=("$pattern: pa:$encoding holds $n entries (expected $expected), format $format")
            fi
            per[$encoding]=$(awk -v m="$bytes" -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", m / n; else print "n/a" }')
            entries=$n
        done
        # shellcheck disable=SC2059
        printf "$PATTERN_ROW" "${labels[$pattern]}" "$entries" "${per[compact]}" "${per[compact1]}" "${per[zset]}" \
            "$(ratio "${per[compact]}" "${per[compact1]}")"
    done
    echo "(bytes per live entry, MEMORY USAGE SAMPLES 0 / SWL.ENTRIES; format 2: swl.encoding compact, format 1: compact1)"
    if [ "${#problems[@]}" -gt 0 ]; then printf 'NOT AS BUILT: %s\n' "${problems[@]}"; fi
    cli flushall >/dev/null
    cli config set swl.encoding zset >/dev/null
}

# The usual script with the time of the call passed in (ARGV[3]) rather
# than read from the server's clock, so that it runs the same calls as the
# module and the library; the member is that time and the count, unique
# as long as the times are.
LUA_AT='local now = tonumber(ARGV[3])
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - window)
local count = redis.call("ZCARD", KEYS[1])
if count < limit then
  redis.call("ZADD", KEYS[1], now, ARGV[3] .. "-" .. count)
  redis.call("PEXPIRE", KEYS[1], window)
  return 1
end
return 0'

BEHIND_ROUNDS=${BENCH_BEHIND_ROUNDS:-5}
BEHIND_CALLS=${BENCH_BEHIND_CALLS:-6000}

# Calls number `from` to `to` - 1 of one key at 100 a second under a
# one-minute window: in order (t = t0 + 10 ms a call), or from three
# servers 30 ms apart (t, t - 30, t - 60 in turn); `prefix` is the call up
# to now_ms, which comes last.
behind_calls() {
    awk -v p="$1" -v from="$2" -v to="$3" -v prefix="$4" -v b=1700000000000 'BEGIN {
        for (i = from; i < to; i++) printf "%s %.0f\r\n", prefix, b + 10 * i - (p == "servers" ? 30 * (i % 3) : 0) }'
}

# Server time per call (INFO commandstats) of the module, the library
# and the usual script (with the time passed in) on format 2 (the
# script: its sorted set), in steady state: each log first takes a
# minute of calls (6,000), then every call trims about one entry and
# adds one. In order against three servers 30 ms apart, one after the
# other on each path; the paths run in turn, BEHIND_ROUNDS rounds of
# BEHIND_CALLS calls each (continuing the times), and each figure is the
# median of its rounds.
behind_cost() {
    local sha_at pattern path round from rounds=() problems=()
    local -A prefix stat us
    cli flushall >/dev/null
    sha_at=$(cli script load "$LUA_AT")
    cli config set swl.encoding compact >/dev/null
    load_library compact
    for pattern in inorder servers; do
        prefix[module:$pattern]="SWL.CHECK bh:m:$pattern 60000 $BIG"
        prefix[library:$pattern]="FCALL swl_check 1 bh:l:$pattern 60000 $BIG"
        prefix[script:$pattern]="EVALSHA $sha_at 1 bh:s:$pattern 60000 $BIG"
        for path in module library script; do
            behind_calls "$pattern" 0 6000 "${prefix[$path:$pattern]}" | pipe_measured
        done
    done
    stat=([module]=swl.check [library]=fcall [script]=evalsha)
    for round in $(seq 1 "$BEHIND_ROUNDS"); do
        from=$((6000 + (round - 1) * BEHIND_CALLS))
        for path in module library script; do
            for pattern in inorder servers; do
                cli config resetstat >/dev/null
                behind_calls "$pattern" "$from" $((from + BEHIND_CALLS)) "${prefix[$path:$pattern]}" | pipe_measured
                rounds+=("$path:$pattern $(call_time "${stat[$path]}")")
            done
        done
    done
    for pattern in inorder servers; do
        for path in module library script; do
            us[$path:$pattern]=$(printf '%s\n' "${rounds[@]}" | awk -v k="$path:$pattern" '$1 == k { print $2 }' | median)
        done
        local m l s
        m=$(format_of "bh:m:$pattern")
        l=$(format_of "bh:l:$pattern")
        s=$(format_of "bh:s:$pattern")
        [ "$m" = v2 ] && [ "$l" = v2 ] && [ "$s" = zset ] ||
            problems+=("$pattern: the module's log is $m, the library's $l, the script's $s")
    done
    printf '%-32s %12s %14s %9s\n' path "in order (a)" "3 servers (b)" "(b)/(a)"
    local -A names=([module]="SWL.CHECK, format 2" [library]="FCALL swl_check, format 2" [script]="the usual script (sorted set)")
    for path in module library script; do
        printf '%-32s %12s %14s %9s\n' "${names[$path]}" "${us[$path:inorder]}" "${us[$path:servers]}" \
            "$(ratio "${us[$path:servers]}" "${us[$path:inorder]}")"
    done
    echo "(server microseconds per call, INFO commandstats; median of $BEHIND_ROUNDS rounds of $BEHIND_CALLS calls, after 6,000 to fill the minute)"
    if [ "${#problems[@]}" -gt 0 ]; then printf 'NOT AS BUILT: %s\n' "${problems[@]}"; fi
    cli flushall >/dev/null
    cli config set swl.encoding zset >/dev/null
    load_library zset
}

COSTLIEST_ROUNDS=${BENCH_COSTLIEST_ROUNDS:-3}

# The server microseconds of one call (its SLOWLOG entry, every call
# logged), or "failed" where its reply is not the integers of a check,
# peek or refund (an error).
slow_us() {
    local reply name
    name=$(echo "$1" | tr '[:upper:]' '[:lower:]')
    cli slowlog reset >/dev/null
    reply=$(cli "$@" 2>&1 | sed -n 1p)
    if ! [[ "$reply" =~ ^[0-9]+$ ]]; then echo failed; return; fi
    cli slowlog get 1 | awk -v c="$name" 'NR == 3 { d = $1 } NR == 4 { n = tolower($1) } END { if (n == c) print d; else print "n/a" }'
}

# The largest of the server times of one call made COSTLIEST_ROUNDS
# times, each on a fresh copy of the log `template`; {key} in an argument
# becomes the copy. "failed" where any call failed.
costliest_call() {
    local template=$1 i
    shift
    for i in $(seq 1 "$COSTLIEST_ROUNDS"); do
        cli copy "$template" cc:one replace >/dev/null
        slow_us "${@//\{key\}/cc:one}"
    done | awk '$1 !~ /^[0-9]+$/ { bad = $1 } $1 + 0 > m { m = $1 + 0 } END { if (bad != "") print bad; else print m }'
    cli del cc:one >/dev/null
}

# The slowest single call found among a set of candidates, on logs of
# format version 2 built by patterns 2, 3 and 4 (memory_arrivals), through
# the module and through the library (loaded with ENCODING 'compact', on
# copies of the module's logs): server microseconds from SLOWLOG
# (slowlog-log-slower-than 0), the largest of COSTLIEST_ROUNDS calls each
# on a fresh copy of the log.
costliest() {
    local pattern path c
    local patterns=(hour tenmin crafted) candidates=(older middle block cost refund peek)
    local -A cell oldest newest middle blockfirst peekargs entries
    local -A labels=(
        [older]="an entry older than all"
        [middle]="an entry at the middle entry's time"
        [block]="1 ms after a middle block's first time"
        [cost]="COST 100000 at the newest time"
        [refund]="a refund of half the entries"
        [peek]="a PEEK with 100 windows"
    )
    cli flushall >/dev/null
    cli config set slowlog-log-slower-than 0 >/dev/null
    load_library compact
    for pattern in "${patterns[@]}"; do
        build_pattern "cl:$pattern" "$pattern" compact
        local times n span head tail m w=() i
        times=$(cli swl.entries "cl:$pattern" | grep '^[0-9]' | sort -n)
        n=$(echo "$times" | wc -l)
        entries[$pattern]=$n
        oldest[$pattern]=$(echo "$times" | sed -n 1p)
        newest[$pattern]=$(echo "$times" | sed -n '$p')
        middle[$pattern]=$(echo "$times" | sed -n "$((n / 2))p")
        head=$(cli getrange "cl:$pattern" 12 15 | od -An -tu4 | awk '{ print $1 }')
        tail=$(cli getrange "cl:$pattern" 16 19 | od -An -tu4 | awk '{ print $1 }')
        m=$(((${head:-0} + ${tail:-0}) / 2))
        blockfirst[$pattern]=$(cli getrange "cl:$pattern" $((24 + 256 * m)) $((24 + 256 * m + 6)) | od -An -tu1 -N7 |
            awk '{ t = 0; for (i = 7; i >= 1; i--) t = t * 256 + $i; printf "%.0f", t }')
        # 100 windows from a hundredth of the log's span to all of it,
        # each limit about half the entries in its window: each denies
        # and looks up the entry it waits for.
        span=$((newest[$pattern] - oldest[$pattern] + 1))
        for i in $(seq 1 100); do
            [ "$i" -gt 1 ] && w+=(WINDOW)
            w+=($((span * i / 100 + 1)) $((n * i / 200 + 1)))
        done
        peekargs[$pattern]="${w[*]}"
        cli copy "cl:$pattern" "cl:fn:$pattern" >/dev/null
    done
    for pattern in "${patterns[@]}"; do
        local o=${oldest[$pattern]} nw=${newest[$pattern]} half=$((entries[$pattern] / 2))
        local -a pk
        read -r -a pk <<<"${peekargs[$pattern]}"
        for path in module library; do
            local key="cl:$pattern" check=(SWL.CHECK "{key}") peek=(SWL.PEEK "{key}") refund=(SWL.REFUND "{key}")
            if [ "$path" = library ]; then
                key="cl:fn:$pattern" check=(FCALL swl_check 1 "{key}") peek=(FCALL swl_peek 1 "{key}") refund=(FCALL swl_refund 1 "{key}")
            fi
            cell[older:$pattern:$path]=$(costliest_call "$key" "${check[@]}" "$BIG" "$BIG" $((o - 1000)))
            cell[middle:$pattern:$path]=$(costliest_call "$key" "${check[@]}" "$BIG" "$BIG" "${middle[$pattern]}")
            cell[block:$pattern:$path]=$(costliest_call "$key" "${check[@]}" "$BIG" "$BIG" $((blockfirst[$pattern] + 1)))
            cell[cost:$pattern:$path]=$(costliest_call "$key" "${check[@]}" "$BIG" "$BIG" "$nw" COST 100000)
            cell[refund:$pattern:$path]=$(costliest_call "$key" "${refund[@]}" "$BIG" "$BIG" "$nw" COST "$half")
            cell[peek:$pattern:$path]=$(costliest_call "$key" "${peek[@]}" "${pk[@]:0:2}" "$nw" "${pk[@]:2}")
        done
    done
    local row='%-40s %9s %9s %9s %9s %9s %9s\n'
    printf '%-40s %19s %19s %19s\n' "" "2. an hour behind" "3. 0-10 min behind" "4. crafted"
    # shellcheck disable=SC2059
    printf "$row" call module swl.lua module swl.lua module swl.lua
    for c in "${candidates[@]}"; do
        # shellcheck disable=SC2059
        printf "$row" "${labels[$c]}" "${cell[$c:hour:module]}" "${cell[$c:hour:library]}" "${cell[$c:tenmin:module]}" \
            "${cell[$c:tenmin:library]}" "${cell[$c:crafted:module]}" "${cell[$c:crafted:library]}"
    done
    local worst=()
    for pattern in "${patterns[@]}"; do
        for path in module library; do
            worst+=("$(for c in "${candidates[@]}"; do echo "${cell[$c:$pattern:$path]} $c"; done |
                awk '$1 ~ /^[0-9]+$/ && $1 + 0 >= m { m = $1 + 0; w = $2 } END { if (w == "") print "failed"; else print m " (" w ")" }')")
        done
    done
    echo "worst:"
    for i in 0 1 2; do
        printf '  %-10s module %-18s swl.lua %s\n' "${patterns[$i]}" "${worst[$((2 * i))]}" "${worst[$((2 * i + 1))]}"
    done
    echo "(server microseconds, SLOWLOG, the largest of $COSTLIEST_ROUNDS calls each on a fresh copy; logs of format 2 made by the module, entries: hour ${entries[hour]}, tenmin ${entries[tenmin]}, crafted ${entries[crafted]})"
    cli config set slowlog-log-slower-than 10000 >/dev/null
    cli flushall >/dev/null
    cli config set swl.encoding zset >/dev/null
    load_library zset
}

# The usual script with the time passed in (LUA_AT), for two windows: the
# first (ARGV[1], the widest) trims and is counted by ZCARD, the second
# (ARGV[4], limit ARGV[5]) by ZCOUNT over its span; the entry is added only
# where both admit.
LUA_AT2='local now = tonumber(ARGV[3])
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local short, short_limit = tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - window)
local count = redis.call("ZCARD", KEYS[1])
if count < limit and redis.call("ZCOUNT", KEYS[1], "(" .. (now - short), "+inf") < short_limit then
  redis.call("ZADD", KEYS[1], now, ARGV[3] .. "-" .. count)
  redis.call("PEXPIRE", KEYS[1], window)
  return 1
end
return 0'

STEADY_ROUNDS=${BENCH_STEADY_ROUNDS:-7}
STEADY_CALLS=${BENCH_STEADY_CALLS:-2500}
STEADY_SIZES=${BENCH_STEADY_SIZES:-10 1000 10000 100000}
STEADY_PATHS=(script lib2 lib1 libz mod2 mod1 modz)
STEADY_WORKLOADS=(one two denied behind)

# The calls number `from` to `to` - 1 of a log of `n` entries spread evenly
# over an hour (3,600,000 / n ms apart, from t = 1700000000000): `prefix`,
# then now_ms, then `suffix`. In order (call i at t + i spacings); behind
# (every third call, i = 2 mod 3, 30 ms before the call before it, the
# newest entry); or, where `fixed` is given, every call at that time.
steady_calls() {
    awk -v p="$1" -v from="$2" -v to="$3" -v n="$4" -v prefix="$5" -v suffix="$6" -v fixed="${7:-}" -v b=1700000000000 'BEGIN {
        s = 3600000 / n
        for (i = from; i < to; i++) {
            if (fixed != "") t = fixed
            else if (p == "behind" && i % 3 == 2) t = b + (i - 1) * s - 30
            else t = b + i * s
            printf "%s %.0f%s\r\n", prefix, t, (suffix == "" ? "" : " " suffix)
        }
    }'
}

# Sets up one path: swl.encoding for the module, the library's ENCODING
# for the library (the format each writes), nothing for the script.
steady_use() {
    case "$1" in
        mod2) cli config set swl.encoding compact >/dev/null ;;
        mod1) cli config set swl.encoding compact1 >/dev/null ;;
        modz) cli config set swl.encoding zset >/dev/null ;;
        lib2) load_library compact ;;
        lib1) load_library compact1 ;;
        libz) load_library zset ;;
    esac
}

# The call of a path on `key` up to now_ms, one window of an hour and
# `limit` (`script2`: the two-window script).
steady_prefix() {
    local path=$1 key=$2 limit=$3
    case "$path" in
        script) echo "EVALSHA $steady_sha 1 $key 3600000 $limit" ;;
        script2) echo "EVALSHA $steady_sha2 1 $key 3600000 $limit" ;;
        lib*) echo "FCALL swl_check 1 $key 3600000 $limit" ;;
        mod*) echo "SWL.CHECK $key 3600000 $limit" ;;
    esac
}

# One workload's calls `from` to `to` - 1 of one path on a log of `n`
# entries: one window, an hour and 2n (admitted); two windows, an hour
# and 2n, a minute and twice the entries in a minute plus 2 (admitted);
# denied, an hour and n at `fixed` (a time before the oldest entry leaves:
# n live, nothing trimmed, nothing added); behind, as one window with
# every third call 30 ms behind the newest (admitted).
steady_workload() {
    local path=$1 workload=$2 from=$3 to=$4 n=$5 fixed=$6 key="st:$1:$2"
    local minute=$((2 * (n / 60) + 2))
    case "$workload" in
        one) steady_calls inorder "$from" "$to" "$n" "$(steady_prefix "$path" "$key" $((2 * n)))" "" ;;
        two)
            if [ "$path" = script ]; then
                steady_calls inorder "$from" "$to" "$n" "$(steady_prefix script2 "$key" $((2 * n)))" "60000 $minute"
            else
                steady_calls inorder "$from" "$to" "$n" "$(steady_prefix "$path" "$key" $((2 * n)))" "WINDOW 60000 $minute"
            fi
            ;;
        denied) steady_calls inorder "$from" "$to" "$n" "$(steady_prefix "$path" "$key" "$n")" "" "$fixed" ;;
        behind) steady_calls behind "$from" "$to" "$n" "$(steady_prefix "$path" "$key" $((2 * n)))" "" ;;
    esac
}

# The commands a path's calls issued since the last reset, per call of
# `outer` (its commandstats name): "name calls usec" for each, the
# commands' own server time per call; the bench's own CONFIG, INFO and
# COPY left out, and the ECHO redis-cli --pipe ends with.
nested_per_call() {
    cli info commandstats | tr -d '\r' | awk -F'[:=,]' -v outer="cmdstat_$1" '
        $1 == outer { calls = $3 }
        $1 ~ /^cmdstat_/ && $1 != outer && $1 !~ /^cmdstat_(config|info|copy|del|flushall|function|script|echo)/ {
            name[++k] = substr($1, 9); n[k] = $3; us[k] = $5 }
        END { for (i = 1; i <= k; i++) if (calls > 0) printf "%s %.2f %.2f\n", name[i], n[i] / calls, us[i] / calls }'
}

# Server time per call (INFO commandstats) of a client's log in steady
# state: n entries spread evenly over a one-hour window, each call one
# spacing (3,600,000 / n ms) later with now_ms passed in, so that it trims
# one entry and adds one; for n = 10, 1,000, 10,000 and 100,000. The paths:
# the usual script with now_ms passed in (LUA_AT; LUA_AT2 for two
# windows) on its sorted set, the library (FCALL swl_check) and the module
# (SWL.CHECK) on format 2, format 1 and a sorted set. Each path makes its
# own log (n calls in order under a limit nothing reaches, then max(1,000,
# n/10) calls of the one-window workload), copied to a key per workload,
# each of which first takes max(1,000, n/10) calls of its workload. The
# paths run in turn, STEADY_ROUNDS rounds of STEADY_CALLS calls of each
# workload (the times continuing), and each figure is the median of its
# rounds. Each key is checked, after, to be in the format its path writes
# and to admit (denied: deny) one more call.
steady_cost() {
    local n path workload round warm from fixed problems=()
    local -A us stat nested last
    for path in "${STEADY_PATHS[@]}"; do
        case "$path" in script) stat[$path]=evalsha ;; lib*) stat[$path]=fcall ;; mod*) stat[$path]=swl.check ;; esac
    done
    local -A expect_format=([script]=zset [lib2]=v2 [lib1]=v1 [libz]=zset [mod2]=v2 [mod1]=v1 [modz]=zset)
    local -A labels=([one]="one window, admitted" [two]="two windows, admitted" [denied]="denied (limit = entries)"
        [behind]="every 3rd 30 ms behind")
    local row='%-8s %-26s %8s %15s %15s %15s %15s %15s %15s\n'
    # shellcheck disable=SC2059
    printf "$row" entries workload script "swl.lua v2" "swl.lua v1" "swl.lua zset" "SWL v2" "SWL v1" "SWL zset"
    for n in $STEADY_SIZES; do
        cli flushall >/dev/null
        steady_sha=$(cli script load "$LUA_AT")
        steady_sha2=$(cli script load "$LUA_AT2")
        warm=$((n / 10 > 1000 ? n / 10 : 1000))
        fixed=$(awk -v n="$n" -v i=$((n + warm - 1)) 'BEGIN { printf "%.0f", 1700000000000 + i * 3600000 / n + 1 }')
        for path in "${STEADY_PATHS[@]}"; do
            steady_use "$path"
            steady_calls inorder 0 "$n" "$n" "$(steady_prefix "$path" "st:$path:tpl" "$BIG")" "" | pipe_commands
            steady_calls inorder "$n" $((n + warm)) "$n" "$(steady_prefix "$path" "st:$path:tpl" $((2 * n)))" "" | pipe_commands
            for workload in "${STEADY_WORKLOADS[@]}"; do
                cli copy "st:$path:tpl" "st:$path:$workload" >/dev/null
                steady_workload "$path" "$workload" $((n + warm)) $((n + 2 * warm)) "$n" "$fixed" | pipe_measured
            done
            cli del "st:$path:tpl" >/dev/null
        done
        local rounds=()
        for round in $(seq 1 "$STEADY_ROUNDS"); do
            from=$((n + 2 * warm + (round - 1) * STEADY_CALLS))
            for path in "${STEADY_PATHS[@]}"; do
                steady_use "$path"
                for workload in "${STEADY_WORKLOADS[@]}"; do
                    cli config resetstat >/dev/null
                    steady_workload "$path" "$workload" "$from" $((from + STEADY_CALLS)) "$n" "$fixed" | pipe_measured
                    last[$n:$workload:$path]=$(call_time "${stat[$path]}")
                    rounds+=("$path:$workload ${last[$n:$workload:$path]}")
                    # Where a library call's time goes, from the last round.
                    [[ "$path" = lib* ]] && nested[$n:$workload:$path]=$(nested_per_call "${stat[$path]}")
                done
            done
        done
        # Each key as the workload leaves it: in its path's format, and
        # admitting (denied: denying) the next call.
        from=$((n + 2 * warm + STEADY_ROUNDS * STEADY_CALLS))
        for path in "${STEADY_PATHS[@]}"; do
            steady_use "$path"
            for workload in "${STEADY_WORKLOADS[@]}"; do
                local format reply expected=1 call
                [ "$workload" = denied ] && expected=0
                read -r -a call <<<"$(steady_workload "$path" "$workload" "$from" $((from + 1)) "$n" "$fixed" | tr -d '\r')"
                reply=$(cli "${call[@]}" 2>&1 | sed -n 1p)
                format=$(format_of "st:$path:$workload")
                if [ "$reply" != "$expected" ] || [ "$format" != "${expect_format[$path]}" ]; then
                    problems+=("$n $path $workload: replied $reply (expected $expected), format $format (expected ${expect_format[$path]})")
                fi
            done
        done
        for workload in "${STEADY_WORKLOADS[@]}"; do
            local cells=() script_us
            for path in "${STEADY_PATHS[@]}"; do
                us[$n:$workload:$path]=$(printf '%s\n' "${rounds[@]}" | awk -v k="$path:$workload" '$1 == k { print $2 }' | median)
            done
            script_us=${us[$n:$workload:script]}
            for path in "${STEADY_PATHS[@]:1}"; do
                cells+=("${us[$n:$workload:$path]} ($(ratio "${us[$n:$workload:$path]}" "$script_us"))")
            done
            # shellcheck disable=SC2059
            printf "$row" "$(commas "$n")" "${labels[$workload]}" "$script_us" "${cells[@]}"
        done
    done
    local versus=""
    for n in $STEADY_SIZES; do
        versus+=" $(commas "$n") $(ratio "${us[$n:two:lib2]}" "${us[$n:two:libz]}"),"
    done
    echo "(server microseconds per call, INFO commandstats; median of $STEADY_ROUNDS rounds of $(commas "$STEADY_CALLS") calls, the paths in turn; in parentheses the time over the script's on the same workload; the script's two-window row is the script with a ZCOUNT for the minute)"
    echo "two windows, swl.lua format 2 over swl.lua sorted set, by entries:${versus%,}"
    steady_bounds
    steady_breakdown
    if [ "${#problems[@]}" -gt 0 ]; then printf 'NOT AS BUILT: %s\n' "${problems[@]}"; fi
    cli flushall >/dev/null
    cli config set swl.encoding zset >/dev/null
    load_library zset
}

# The library's targets on logs in steady state (the ratio, and whether
# it is within its bound), at each size, from steady_cost's figures (`us`
# in its scope).
steady_bounds() {
    local n first=${STEADY_SIZES%% *} row='%-44s %8s'
    local rows=(
        "format 2 admitted / the script:lib2:one:script:one:2"
        "format 2 denied / the script:lib2:denied:script:denied:2.5"
        "sorted set admitted / the script:libz:one:script:one:1.8"
        "sorted set denied / the script:libz:denied:script:denied:2.5"
        "format 2 two windows / sorted set two:lib2:two:libz:two:1.3"
        "format 2 3rd call 30 ms behind / the script:lib2:behind:script:behind:2.5"
    )
    echo
    echo "The function library against its targets (ratio, and within the bound: yes or no)"
    # shellcheck disable=SC2059
    printf "$row" target bound
    for n in $STEADY_SIZES; do printf ' %16s' "$(commas "$n")"; done
    echo
    local entry label path workload base base_workload bound r
    for entry in "${rows[@]}"; do
        IFS=: read -r label path workload base base_workload bound <<<"$entry"
        # shellcheck disable=SC2059
        printf "$row" "$label" "$bound"
        for n in $STEADY_SIZES; do
            r=$(ratio "${us[$n:$workload:$path]}" "${us[$n:$base_workload:$base]}")
            printf ' %16s' "$r $(at_most "$r" "$bound")"
        done
        echo
    done
    # Format 1 is held to its own cost at the smallest size: flat in N.
    for workload in "${STEADY_WORKLOADS[@]}"; do
        # shellcheck disable=SC2059
        printf "$row" "format 1 $workload / itself at $(commas "$first")" 1.25
        for n in $STEADY_SIZES; do
            r=$(ratio "${us[$n:$workload:lib1]}" "${us[$first:$workload:lib1]}")
            printf ' %16s' "$r $(at_most "$r" 1.25)"
        done
        echo
    done
}

# Where a library call's time goes, in the last round of each (its time,
# not the median's): the commands it issues per call and their own server
# time, and the rest, which is Lua's (and each redis.call's cost in Lua:
# argument and reply conversion). From steady_cost's `last` and `nested`.
steady_breakdown() {
    local n workload path total cmds own
    echo
    echo "Where a library call's time goes (server microseconds per call in the last round: the commands it issues, and the rest, Lua's)"
    printf '%-8s %-10s %-6s %8s %8s %8s  %s\n' entries workload path total commands rest "commands per call"
    for n in $STEADY_SIZES; do
        for workload in "${STEADY_WORKLOADS[@]}"; do
            for path in lib2 lib1 libz; do
                total=${last[$n:$workload:$path]}
                own=$(echo "${nested[$n:$workload:$path]}" | awk '{ s += $3 } END { printf "%.2f", s }')
                cmds=$(echo "${nested[$n:$workload:$path]}" | awk '$2 > 0 { printf "%s%s %.2f", (k++ ? ", " : ""), $1, $2 }')
                printf '%-8s %-10s %-6s %8s %8s %8s  %s\n' "$(commas "$n")" "$workload" "$path" "$total" "$own" \
                    "$(awk -v t="$total" -v c="$own" 'BEGIN { if (t ~ /^[0-9.]+$/) printf "%.2f", t - c; else print "n/a" }')" "$cmds"
            done
        done
    done
    echo "(commands: their own server time, as INFO commandstats counts each; rest: the call's time less theirs)"
}

start_server
sha=$(cli script load "$LUA")
load_library zset
printf '%s\n' "$FLOOR" | cli -x function load replace >/dev/null
# BENCH_ONLY=worst, rewrites, speed, library or formats runs only the
# costliest single calls, the rows of calls that rewrite large compact
# logs, the server time of compact format version 2 beside version 1, the
# function library against the usual script, or the memory by arrival
# pattern and the two-window curve by the size of the log; patterns,
# behind or costliest only the memory of one log under out-of-order
# arrivals, the time per call of clients behind in steady state, or the
# slowest calls on logs built out of order; steady only the time per call
# on logs in steady state against the script's.
PATTERNS_TITLE="Memory per live entry of one log under out-of-order arrivals (bytes)"
BEHIND_TITLE="Clients behind, steady state: in order at 100/s against three servers 30 ms apart, one-minute window (server microseconds per call)"
COSTLIEST_TITLE="The slowest single calls on logs of format 2 built out of order (server microseconds, SLOWLOG)"
STEADY_TITLE="Logs in steady state: n entries evenly over an hour, each call one spacing later, trimming one and adding one (server microseconds per call)"
case "${BENCH_ONLY:-}" in
    "") ;;
    worst)
        library_formats
        echo
        echo "The most expensive single calls (server microseconds per call; target < 10,000)"
        worst_cases
        exit 0
        ;;
    rewrites)
        library_formats
        echo
        echo "Calls that rewrite large compact logs (server milliseconds per call, INFO commandstats; median of $ONE_ROUNDS)"
        compact_rewrites
        exit 0
        ;;
    speed)
        echo "Compact format version 2 beside version 1: one-window SWL.CHECK, server time per call (microseconds, INFO commandstats; median of $FORMAT_ROUNDS rounds)"
        format_speeds
        exit 0
        ;;
    library)
        library_formats
        echo
        echo "The function library against the usual script, one window (server microseconds per call, INFO commandstats; median of $LIBRARY_ROUNDS rounds)"
        library_cost
        exit 0
        ;;
    formats)
        library_formats
        echo
        echo "Memory per tracked request by arrival pattern (MEMORY USAGE / 10,000 entries, bytes)"
        memory_patterns
        echo
        echo "Two windows, an hour and a minute, by the size of the log (server microseconds per check)"
        two_window_curve
        exit 0
        ;;
    patterns)
        echo "$PATTERNS_TITLE"
        memory_arrivals
        exit 0
        ;;
    behind)
        echo "$BEHIND_TITLE"
        behind_cost
        exit 0
        ;;
    costliest)
        echo "$COSTLIEST_TITLE"
        costliest
        exit 0
        ;;
    steady)
        echo "$STEADY_TITLE"
        steady_cost
        exit 0
        ;;
    *) echo "bench: BENCH_ONLY is worst, rewrites, speed, library, formats, patterns, behind, costliest or steady, not $BENCH_ONLY" >&2; exit 2 ;;
esac
version=$(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')
echo "redis-swl benchmark: Redis $version, $(nproc) cores, $CLIENTS clients, pipeline $PIPELINE, $REQUESTS requests per run"
library_formats
echo
echo "Throughput (requests/s)"
printf '%-10s %10s %10s %10s %10s %10s %10s %10s %10s\n' workload PING ZADD Lua swl.lua SWL.CHECK "vs Lua" "vs swl.lua" "vs ZADD"
server_time=()
throughput admitted 100000 1000   # many fresh keys, nearly all admitted
throughput denied 10 10           # ten hot keys at their limit, nearly all denied
echo
echo "Server time per call (microseconds, INFO commandstats; the client shares the machine above)"
printf '%-10s %10s %10s %10s %10s %10s %10s %10s\n' workload ZADD Lua swl.lua SWL.CHECK "vs Lua" "vs swl.lua" "vs ZADD"
printf '%s\n' "${server_time[@]}"
echo
echo "Compact encoding (swl.encoding compact, format version 2): throughput (requests/s) and server time per call (microseconds)"
printf '%-10s %10s %10s %10s %10s %10s %10s %10s %10s\n' workload compact Lua "vs Lua" "compact us" "ZADD us" "ZADD+PX us" "vs ZADD" "vs ZADD+PX"
library_compact=()
compact_speed admitted 100000 1000
compact_speed denied 10 10
echo "(targets: vs Lua >= 4; admitted vs ZADD+PX >= 1; denied vs ZADD >= 1)"
echo
echo "Compact format version 2 beside version 1: one-window SWL.CHECK, server time per call (microseconds, INFO commandstats; median of $FORMAT_ROUNDS rounds)"
format_speeds
echo
echo "The function library on compact logs: throughput (requests/s) and server time per call (microseconds)"
printf '%-10s %10s %10s %10s %10s %10s %10s\n' workload swl.lua SWL.CHECK "vs swl.lua" "swl.lua us" "SWL us" "vs swl.lua"
printf '%s\n' "${library_compact[@]}"
echo
echo "Memory per tracked request (MEMORY USAGE / entries, bytes; targets for compact: <= 8 at 100, <= 5 at 1,000 and 10,000)"
printf '%-10s %12s %12s %12s %12s %12s %13s\n' entries script "sorted set" compact "vs script" "cpt vs script" "zset enc."
for n in 100 128 1000 10000; do memory_per_entry "$n"; done
echo
echo "Hot key (server-side latency, INFO latencystats)"
hot_key_latency
echo
echo "One call trimming a backlog (server-side microseconds for the whole call)"
printf '%-10s %-6s %12s %18s\n' trimmed kept SWL.CHECK ZREMRANGEBYSCORE
for n in 1 8 32 64 256 4096 100000; do backlog_trim "$n" 1; done
backlog_trim 100000 0
echo
echo "Several windows (server microseconds per call, INFO commandstats)"
printf '%-34s %10s %10s %10s\n' workload SWL.CHECK swl.lua "vs swl.lua"
multi_window
echo "(target: vs swl.lua >= 3)"
echo
echo "The most expensive single calls (server microseconds per call; target < 10,000)"
worst_cases
echo
echo "Calls that rewrite large compact logs (server milliseconds per call, INFO commandstats; median of $ONE_ROUNDS)"
compact_rewrites
echo
echo "Memory per tracked request by arrival pattern (MEMORY USAGE / 10,000 entries, bytes)"
memory_patterns
echo
echo "Two windows, an hour and a minute, by the size of the log (server microseconds per check)"
two_window_curve
echo
echo "The function library against the usual script, one window (server microseconds per call, INFO commandstats; median of $LIBRARY_ROUNDS rounds)"
library_cost
echo
echo "SWL.REFUND beside SWL.CHECK (server microseconds per call, INFO commandstats: COST 2 checks, then refunds of 1, on 100,000 keys)"
printf '%-10s %12s %12s %12s %14s %14s %12s\n' encoding SWL.CHECK SWL.REFUND "check/refund" "swl_check us" "swl_refund us" "vs swl.lua"
refund_speed zset
refund_speed compact1
refund_speed compact
echo
echo "$PATTERNS_TITLE"
memory_arrivals
echo
echo "$BEHIND_TITLE"
behind_cost
echo
echo "$COSTLIEST_TITLE"
costliest
echo
echo "$STEADY_TITLE"
steady_cost
