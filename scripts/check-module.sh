#!/usr/bin/env bash
# Checks a built module without loading it, from its ELF headers (readelf
# reads any architecture): that it is a shared object for ARCH exporting
# RedisModule_OnLoad; for gnu, that it needs no glibc symbol newer than
# GLIBC_FLOOR and no library beyond libc, libm, libgcc_s, libpthread, libdl
# and the dynamic loader; for musl, that it needs musl's libc alone (as
# libc.so, or Alpine's libc.musl-ARCH.so.1: musl's loader answers both
# itself) and no glibc symbol. Prints what it checked; exits 1 on the
# first failure.
#
#   scripts/check-module.sh path/to/libredis_swl.so x86_64|aarch64 gnu|musl
#   scripts/check-module.sh --glibc-floor     # prints the floor
set -euo pipefail

GLIBC_FLOOR=2.17
if [ "${1:-}" = --glibc-floor ]; then
    echo "$GLIBC_FLOOR"
    exit 0
fi
[ $# -eq 3 ] || { echo "usage: scripts/check-module.sh SO x86_64|aarch64 gnu|musl" >&2; exit 2; }
so=$1 arch=$2 libc=$3
command -v readelf >/dev/null || { echo "check-module: readelf is missing (Debian: apt-get install binutils)" >&2; exit 1; }

fail() {
    echo "check-module: $so: $*" >&2
    exit 1
}
[ -f "$so" ] || fail "no such file"

case "$arch" in
    x86_64) machine="Advanced Micro Devices X86-64" loader=ld-linux-x86-64.so.2 ;;
    aarch64) machine="AArch64" loader=ld-linux-aarch64.so.1 ;;
    *) fail "unknown architecture $arch" ;;
esac

header=$(readelf -h "$so")
grep -q "Class: *ELF64" <<<"$header" || fail "not a 64-bit ELF file"
grep -q "Type: *DYN" <<<"$header" || fail "not a shared object"
grep -q "Machine: *$machine\$" <<<"$header" || fail "not built for $arch: $(grep Machine: <<<"$header")"
readelf --dyn-syms -W "$so" | awk '$7 != "UND" && $8 == "RedisModule_OnLoad"' | grep -q . ||
    fail "does not export RedisModule_OnLoad"

needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort)
# The glibc versions its symbols need, from the version-needs section.
versions=$(readelf -V -W "$so" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV || true)

case "$libc" in
    gnu)
        allowed=" libc.so.6 libm.so.6 libgcc_s.so.1 libpthread.so.0 libdl.so.2 $loader "
        grep -qx libc.so.6 <<<"$needed" || fail "does not need libc.so.6"
        newest=$(tail -n 1 <<<"$versions")
        [ -n "$newest" ] || fail "needs no GLIBC_ version at all"
        [ "$(printf '%s\n' "${newest#GLIBC_}" "$GLIBC_FLOOR" | sort -V | tail -n 1)" = "$GLIBC_FLOOR" ] ||
            fail "needs $newest, newer than GLIBC_$GLIBC_FLOOR"
        newest="newest glibc symbol $newest (at most GLIBC_$GLIBC_FLOOR)"
        ;;
    musl)
        allowed=" libc.so libc.musl-$arch.so.1 "
        [ "$(grep -c '^libc\.' <<<"$needed")" -eq 1 ] || fail "does not need musl's libc once: $needed"
        [ -z "$versions" ] || fail "needs glibc symbol versions: $(tr '\n' ' ' <<<"$versions")"
        ! readelf --dyn-syms -W "$so" | grep -q '@GLIBC_' || fail "names glibc symbols"
        newest="no glibc symbol"
        ;;
    *) fail "unknown libc $libc" ;;
esac
for library in $needed; do
    [[ "$allowed" == *" $library "* ]] || fail "needs $library, beyond$allowed"
done

echo "check-module: ok $so: ELF64 shared object for $arch exporting RedisModule_OnLoad;" \
    "needs $(tr '\n' ' ' <<<"$needed")(allowed:$allowed); $newest"
