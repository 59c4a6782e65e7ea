#!/usr/bin/env bash
# Builds every file of a release into dist/ (made anew), named for
# Cargo.toml's version:
#   redis-swl-VERSION-linux-{x86_64,aarch64}-{gnu,musl}.tar.gz
#       the module (glibc 2.17 or later, or musl), LICENSE and a README
#   swl-VERSION.lua      the function library, with its version and license
#   redis_swl-VERSION-py3-none-any.whl, redis_swl-VERSION.tar.gz
#                        the Python package
#   redis-swl-VERSION.tgz                 the Node package
#   redis-swl-client-VERSION.crate        the Rust crate
#   SHA256SUMS           over all of them
# The Go module (clients/go) has no file here: Go fetches it from the
# repository by the tag clients/go/vVERSION, which only publishing pushes.
# It installs what it needs (scripts/setup*.sh). `make dist-test` checks
# the result. A release is built from a clean checkout of its commit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
platforms=(x86_64-gnu x86_64-musl aarch64-gnu aarch64-musl)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
    echo "dist: warning: the work tree has changes that no commit holds" >&2
fi
# Archive entries dated by the last commit rather than by the build, owned
# by root, in name order.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

bash scripts/setup.sh
bash scripts/build-module.sh "${platforms[@]}"
bash scripts/build-rls.sh "${platforms[@]}"
bash scripts/setup-python.sh
bash scripts/setup-node.sh

rm -rf dist target/dist
mkdir -p dist target/dist

tarball() { # directory under target/dist, file in dist/
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
        -C target/dist -cf - "$1" | gzip -n -9 >"dist/$2"
}

for platform in "${platforms[@]}"; do
    arch=${platform%-*} libc=${platform#*-}
    name="redis-swl-$version-linux-$platform"
    case "$libc" in
        gnu) needs="glibc $(bash scripts/check-module.sh --glibc-floor) or later (Debian 8+, Ubuntu 14.04+, RHEL and CentOS 7+, Amazon Linux 2+, the redis Docker images that are not -alpine)" ;;
        musl) needs="musl (Alpine, and the redis:*-alpine Docker images), and nothing else: Alpine's libgcc is not needed" ;;
    esac
    mkdir "target/dist/$name"
    install -m 0755 "target/$arch-unknown-linux-$libc/release/libredis_swl.so" "target/dist/$name/"
    cp LICENSE "target/dist/$name/"
    cat >"target/dist/$name/README" <<EOF
redis-swl $version for Linux $arch with $libc

libredis_swl.so is the redis-swl module for Redis 7.0 and later: an exact,
atomic sliding-window-log rate limiter (SWL.CHECK, SWL.PEEK, SWL.REFUND,
SWL.ENTRIES). It needs $needs.

Load it when the server starts:

    redis-server --loadmodule /path/to/libredis_swl.so

or with the line "loadmodule /path/to/libredis_swl.so" in redis.conf.
Then:

    redis-cli SWL.CHECK rl:alice 600000 3 '*'

replies 1 (allowed), 3 (limit), 2 (remaining), -1, 600000, 600000.

Installing, settings, replicas and Redis Cluster: docs/installing.md,
and every command: docs/commands.md, at
https://github.com/redis-swl/redis-swl. License: BSD-3-Clause, in LICENSE.
EOF
    tarball "$name" "$name.tar.gz"
done

# The function library: FUNCTION LOAD wants its first line first; its
# version and the license follow as comments.
for platform in "${platforms[@]}"; do
    arch=${platform%-*} libc=${platform#*-}
    name="swl-rls-$version-linux-$platform"
    mkdir "target/dist/$name"
    install -m 0755 "target/rls/$arch-unknown-linux-$libc/release/swl-rls" "target/dist/$name/"
    cp LICENSE "target/dist/$name/"
    cat >"target/dist/$name/README" <<EOF
swl-rls $version for Linux $arch with $libc

swl-rls is Envoy's rate limit service (envoy.service.ratelimit.v3) with
exact sliding windows on Redis (with the redis-swl module, or the function
library, which it loads itself), configured as envoyproxy/ratelimit is:
the same YAML files under RUNTIME_ROOT and the same environment variables.

    REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:6379 \\
    RUNTIME_ROOT=/srv/runtime_data/current RUNTIME_SUBDIRECTORY=ratelimit \\
    ./swl-rls

Envoy, Istio, Envoy Gateway and Contour, every setting, and where it
differs from envoyproxy/ratelimit: docs/envoy.md at
https://github.com/redis-swl/redis-swl. License: BSD-3-Clause, in LICENSE.
EOF
    tarball "$name" "$name.tar.gz"
done

{
    head -n 1 scripts/swl.lua
    echo "-- redis-swl $version function library (FCALL_RO swl_version 0 replies $version)."
    echo "--[["
    cat LICENSE
    echo "]]"
    tail -n +2 scripts/swl.lua
} >"dist/swl-$version.lua"

target/python/bin/python -m build --no-isolation --outdir dist clients/python >/dev/null
(cd clients/node && npm pack --silent --pack-destination "$root/dist" >/dev/null)
CARGO_TARGET_DIR=target/clients-rust "${CARGO:-cargo}" package --manifest-path clients/rust/Cargo.toml \
    --allow-dirty --no-verify --quiet
cp "target/clients-rust/package/redis-swl-client-$version.crate" dist/

# The Go module is fetched by path (go get
# github.com/redis-swl/redis-swl/clients/go@v$version): its release is the
# tag clients/go/v$version on the release's commit, which publishing pushes.
# Nothing is tagged here; the module must only be ready: its copy of the
# function library is this release's.
cmp -s clients/go/swl.lua scripts/swl.lua ||
    { echo "dist: clients/go/swl.lua differs from scripts/swl.lua (run go generate in clients/go)" >&2; exit 1; }
grep -qx "module github.com/redis-swl/redis-swl/clients/go" clients/go/go.mod ||
    { echo "dist: clients/go/go.mod does not name the module's path" >&2; exit 1; }

(cd dist && sha256sum -- * >SHA256SUMS)
echo "dist: built into dist/ (the Go module is published by the tag clients/go/v$version):"
(cd dist && ls -l)
