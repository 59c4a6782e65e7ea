#!/usr/bin/env bash
# swl-rls as releases ship it (make dist): built with zig for Linux x86_64
# and aarch64, against glibc at the module's floor (scripts/check-module.sh
# --glibc-floor) or statically against musl, into
# target/rls/<target>/release/swl-rls, and each checked from its headers:
# its architecture, its newest glibc symbol, or no interpreter at all.
#   scripts/build-rls.sh x86_64-gnu [x86_64-musl aarch64-gnu aarch64-musl]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

GLIBC_FLOOR=$(bash scripts/check-module.sh --glibc-floor)
[ $# -gt 0 ] || { echo "usage: scripts/build-rls.sh x86_64-gnu [x86_64-musl aarch64-gnu aarch64-musl]" >&2; exit 2; }

mapfile -t targets < <(bash scripts/setup-zig.sh "$@")
[ ${#targets[@]} -eq $# ] || exit 2
export PATH="$root/target/zig/bin:$PATH"

(cd / && CARGO_TARGET_DIR="$root/target/rls" "${CARGO:-cargo}" zigbuild \
    --manifest-path "$root/rls/Cargo.toml" --release --bin swl-rls "${targets[@]}")

fail() { echo "build-rls: $binary: $*" >&2; exit 1; }
for platform in "$@"; do
    arch=${platform%-*} libc=${platform#*-}
    binary="target/rls/$arch-unknown-linux-$libc/release/swl-rls"
    machine=$(readelf -h "$binary" | sed -n 's/^ *Machine: *//p')
    case "$arch" in
        x86_64) [ "$machine" = "Advanced Micro Devices X86-64" ] || fail "is for $machine" ;;
        aarch64) [ "$machine" = "AArch64" ] || fail "is for $machine" ;;
    esac
    if [ "$libc" = musl ]; then
        ! readelf -l "$binary" | grep -q "Requesting program interpreter" || fail "is not static"
        echo "build-rls: $binary: $arch, static (musl)"
    else
        newest=$(readelf -V -W "$binary" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n 1)
        [ "$(printf '%s\n' "${newest#GLIBC_}" "$GLIBC_FLOOR" | sort -V | tail -n 1)" = "$GLIBC_FLOOR" ] ||
            fail "needs $newest, newer than GLIBC_$GLIBC_FLOOR"
        echo "build-rls: $binary: $arch, newest glibc symbol $newest (at most GLIBC_$GLIBC_FLOOR)"
    fi
done
