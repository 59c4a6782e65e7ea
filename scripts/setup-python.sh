#!/usr/bin/env bash
# The Python package's test environment: a virtualenv under target/python
# holding clients/python/requirements-test.txt (made anew when that file
# changes), and the package built from clients/python (with scripts/swl.lua
# copied in) and installed into it as a user installs it, not in editable
# form. Installs python3 and its venv module with apt-get where they are
# missing and this runs as root on Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

env=target/python
requirements=clients/python/requirements-test.txt

if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "setup-python: installing python3 and python3-venv with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq python3 python3-venv >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null; }
    else
        echo "setup-python: python3 with its venv module is missing (Debian: apt-get install python3-venv)" >&2
        exit 1
    fi
fi

if ! cmp -s "$requirements" "$env/requirements-test.txt"; then
    rm -rf "$env"
    python3 -m venv "$env"
    "$env/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$env/requirements-test.txt"
fi
"$env/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation \
    --force-reinstall --no-deps ./clients/python
