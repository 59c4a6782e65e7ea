#!/usr/bin/env bash
# The release build's tools: zig (PyPI's ziglang) as the C compiler and
# linker, and cargo-zigbuild, which builds with it against an old glibc or
# musl; both pinned, in a virtualenv under target/zig (made anew when the
# pins change). With arguments, the Rust targets to build for, as
# build-module.sh names them (x86_64-gnu, aarch64-musl, ...), added with
# rustup where missing; then it prints cargo zigbuild's --target for each
# (gnu against glibc at check-module.sh's floor), one a line.
set -euo pipefail
cd "$(dirname "$0")/.."

GLIBC_FLOOR=$(bash scripts/check-module.sh --glibc-floor)
for platform in "$@"; do
    case "$platform" in
        x86_64-gnu | aarch64-gnu | x86_64-musl | aarch64-musl) ;;
        *) echo "setup-zig: unknown platform $platform" >&2; exit 2 ;;
    esac
done

env=target/zig
pins="ziglang==0.15.2 cargo-zigbuild==0.24.1"

if [ "$(cat "$env/pins" 2>/dev/null)" != "$pins" ]; then
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
            echo "setup-zig: installing python3-venv with apt-get" >&2
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -qq python3-venv >/dev/null 2>&1 ||
                { apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null; }
        else
            echo "setup-zig: python3's venv module is missing (Debian: apt-get install python3-venv)" >&2
            exit 1
        fi
    fi
    echo "setup-zig: installing $pins into $env" >&2
    rm -rf "$env"
    python3 -m venv "$env"
    # shellcheck disable=SC2086 # the pins are words
    "$env/bin/pip" install --quiet --disable-pip-version-check $pins
    echo "$pins" >"$env/pins"
fi

for platform in "$@"; do
    target="${platform%-*}-unknown-linux-${platform#*-}"
    if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
        if ! command -v rustup >/dev/null; then
            echo "setup-zig: the Rust target $target is missing; install it (rustup target add $target)" >&2
            exit 1
        fi
        echo "setup-zig: adding the Rust target $target with rustup" >&2
        rustup target add "$target" >/dev/null
    fi
done

for platform in "$@"; do
    arch=${platform%-*} libc=${platform#*-}
    case "$libc" in
        gnu) echo "--target=$arch-unknown-linux-gnu.$GLIBC_FLOOR" ;;
        musl) echo "--target=$arch-unknown-linux-musl" ;;
    esac
done
