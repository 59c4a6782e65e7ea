#!/usr/bin/env bash
# Makes sure the build and test prerequisites are present: libclang (bindgen
# needs it to read redismodule.h), redis-server / redis-cli, and cargo's
# fmt and clippy.
# On Debian-like systems running as root they are installed with apt-get;
# otherwise the script says exactly what to install and fails.
set -euo pipefail

missing=()

have_libclang() {
    # bindgen honours LIBCLANG_PATH; otherwise it searches the usual places.
    # (libclang-cpp.so is a different library and does not count.)
    local dir
    for dir in "${LIBCLANG_PATH:-}" /usr/lib/llvm-*/lib /usr/lib/*-linux-gnu /usr/lib /usr/local/lib; do
        [ -n "$dir" ] || continue
        if compgen -G "$dir/libclang.so*" >/dev/null || compgen -G "$dir/libclang-[0-9]*.so*" >/dev/null; then
            return 0
        fi
    done
    return 1
}

# The builtin C headers (stddef.h, ...) ship apart from the library itself.
have_clang_headers() {
    compgen -G "/usr/lib/llvm-*/lib/clang/*/include/stddef.h" >/dev/null ||
        compgen -G "/usr/lib/clang/*/include/stddef.h" >/dev/null
}

{ have_libclang && have_clang_headers; } || missing+=(libclang-dev)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust from https://rustup.rs" >&2; exit 1; }
# make test checks formatting and lints (make lint) with the toolchain's
# components, which a minimal rustup profile leaves out.
for component in rustfmt clippy; do
    subcommand=${component/rustfmt/fmt}
    if ! cargo "$subcommand" --version >/dev/null 2>&1; then
        if command -v rustup >/dev/null; then
            echo "setup: adding the Rust component $component with rustup" >&2
            rustup component add "$component" >/dev/null
        else
            echo "setup: cargo $subcommand is missing; install the Rust component $component" >&2
            exit 1
        fi
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${missing[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # The Debian package may start a system redis on 6379; the project never
    # relies on it, and leaving it running would take `make run`'s port.
    if command -v service >/dev/null; then service redis-server stop >/dev/null 2>&1 || true; fi

else
    echo "setup: missing ${missing[*]}." >&2
    echo "setup: on Debian or Ubuntu run: sudo apt-get install ${missing[*]}" >&2
    echo "setup: elsewhere install libclang (for bindgen) and Redis 7 (redis-server, redis-cli)." >&2
    exit 1
fi
