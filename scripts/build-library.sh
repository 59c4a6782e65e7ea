#!/usr/bin/env bash
# Joins the function library's modules, lua/*.lua, into scripts/swl.lua:
# one file because Redis loads one, written as src/ is. Each module's
# chapter opens with a comment naming its file and the Rust it mirrors.
# A module that ends by returning its table is joined as a function
# called once (`local name = (function() ... end)()`), so its locals are
# its own: the main chunk keeps to the few the plain modules declare
# (Lua allows a function 200; tests/library.rs counts them).
#
#   scripts/build-library.sh                  rewrites scripts/swl.lua
#   scripts/build-library.sh OUT              writes OUT instead
#   scripts/build-library.sh OUT EXTRA.lua... appends test-only modules
#                                             (plain), as tests build them
#
# After a change under lua/, run it (make library) and commit both: the
# clients embed scripts/swl.lua, and a test fails where it is not this
# script's output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/scripts/swl.lua}
extra=("${@:2}")

# In order: the module, how it is joined (plain: its top-level locals are
# the main chunk's; table: it returns its table), the Rust it mirrors.
modules=(
    "config plain"
    "error plain src/error.rs"
    "prelude plain"
    "request table src/request.rs"
    "window table src/window.rs"
    "zset table src/redis/zset.rs"
    "keyspace table src/redis/compact.rs"
    "compact table src/codec/slots.rs"
    "packed table src/codec/packed/"
    "commands table src/commands.rs"
    "lib plain src/lib.rs"
)

tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
    first=1
    for entry in "${modules[@]}"; do
        read -r name joined mirror <<<"$entry"
        file="lua/$name.lua"
        # The first module opens the file with the library's shebang line.
        if [ "$first" = 0 ]; then
            echo
            echo "--[[ ======== $name: $file${mirror:+ (mirrors $mirror)} ======== ]]"
            echo
        fi
        first=0
        if [ "$joined" = table ]; then
            echo "local $name = (function()"
            cat "$root/$file"
            echo "end)()"
        else
            cat "$root/$file"
        fi
    done
    # (The form bash before 4.4 takes for an empty array under set -u.)
    for file in ${extra[@]+"${extra[@]}"}; do
        echo
        echo "--[[ ======== test only: $file ======== ]]"
        echo
        cat "$file"
    done
} >"$tmp"
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
