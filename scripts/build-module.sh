#!/usr/bin/env bash
# Builds the module as a release ships it, for each platform named
# (x86_64-gnu, x86_64-musl, aarch64-gnu, aarch64-musl), into
# target/<arch>-unknown-linux-<libc>/release/libredis_swl.so, and checks
# each with scripts/check-module.sh.
#
# zig links it: against glibc 2.17's symbols for gnu, so it loads on any
# glibc from 2.17 (a module built on this machine would need the glibc it
# was built on), and against musl for Alpine. A cdylib for a musl target
# must be built without crt-static, or rustc links it statically, which
# a shared object cannot be.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

[ $# -gt 0 ] || { echo "usage: scripts/build-module.sh x86_64-gnu [x86_64-musl aarch64-gnu aarch64-musl]" >&2; exit 2; }

mapfile -t targets < <(bash scripts/setup-zig.sh "$@")
[ ${#targets[@]} -eq $# ] || exit 2
export PATH="$root/target/zig/bin:$PATH"
for platform in "$@"; do
    arch=${platform%-*}
    if [ "${platform#*-}" = musl ]; then
        export "CARGO_TARGET_${arch^^}_UNKNOWN_LINUX_MUSL_RUSTFLAGS=-C target-feature=-crt-static"
    fi
done

# Built from outside the source tree: zig names its own headers relative
# to the working directory when they lie under it (target/zig), and
# cargo-zigbuild hands those names to bindgen, which runs elsewhere.
(cd / && "${CARGO:-cargo}" zigbuild --manifest-path "$root/Cargo.toml" --release --lib "${targets[@]}")

for platform in "$@"; do
    arch=${platform%-*} libc=${platform#*-}
    bash scripts/check-module.sh "target/$arch-unknown-linux-$libc/release/libredis_swl.so" "$arch" "$libc"
done
