#!/usr/bin/env bash
# A redis-server built against musl, as Alpine's is, for loading the musl
# module into (make dist-test): Debian's redis source package (the release
# Debian ships, fetched by apt-get through a sources list of its own under
# target/musl-redis from the system's own sources), compiled with Debian's
# musl-gcc and run by musl's dynamic loader. Built once; prints the path of
# the server. Needs root on Debian for apt-get (musl-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/target/musl-redis
server=$dir/redis-server

if [ -x "$server" ]; then
    echo "$server"
    exit 0
fi
if ! command -v musl-gcc >/dev/null || [ ! -e "/lib/ld-musl-$(uname -m).so.1" ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "musl-redis: installing musl-tools with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq musl-tools >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq musl-tools >/dev/null; }
    else
        echo "musl-redis: musl-gcc is missing (Debian: apt-get install musl-tools)" >&2
        exit 1
    fi
fi

rm -rf "$dir"
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/apt/sources.list.d" \
    "$dir/src" "$dir/kernel-headers"
# The system's own package sources, as source-package sources, for this
# lookup only: the same archives, the system's configuration untouched.
if [ -f /etc/apt/sources.list ]; then
    sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list >"$dir/apt/sources.list"
fi
for file in /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] && sed 's/^Types:.*/Types: deb-src/' "$file" >"$dir/apt/sources.list.d/$(basename "$file")"
done
apt=(-o "Dir::Etc::SourceList=$dir/apt/sources.list" -o "Dir::Etc::SourceParts=$dir/apt/sources.list.d"
    -o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt/cache" -o "APT::Sandbox::User=root")
echo "musl-redis: fetching Debian's redis source package" >&2
# A source among them that has no source packages fails its part of the
# update; the fetch below says whether the redis source was found.
apt-get "${apt[@]}" update -qq >"$dir/apt/update.log" 2>&1 || true
(cd "$dir/src" && apt-get "${apt[@]}" source --download-only -qq redis >/dev/null) ||
    { cat "$dir/apt/update.log" >&2; exit 1; }
orig=$(ls "$dir"/src/redis_*.orig.tar.gz)
tar -xzf "$orig" -C "$dir/src"

# musl-gcc searches musl's headers only; Redis also includes the kernel's
# (linux/, asm/), which Debian keeps with glibc's, so those three are
# offered after musl's.
ln -s /usr/include/linux "$dir/kernel-headers/linux"
ln -s /usr/include/asm-generic "$dir/kernel-headers/asm-generic"
ln -s "/usr/include/$(uname -m)-linux-gnu/asm" "$dir/kernel-headers/asm"

echo "musl-redis: building $(basename "$orig" .orig.tar.gz) with musl-gcc" >&2
make -C "$dir"/src/redis-*/src -j"$(nproc)" redis-server CC=musl-gcc MALLOC=libc BUILD_TLS=no \
    USE_SYSTEMD=no CFLAGS="-idirafter $dir/kernel-headers" >"$dir/build.log" 2>&1 ||
    { tail -n 30 "$dir/build.log" >&2; exit 1; }
cp "$dir"/src/redis-*/src/redis-server "$server"
echo "$server"
