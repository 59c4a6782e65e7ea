#!/usr/bin/env bash
# Installs what the client examples need, for whichever runtimes this
# machine has: redis-py in a virtual environment under target/, and
# node-redis under examples/node. Prints what it could not set up.
# Usage: scripts/setup-examples.sh python|node
set -uo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
python)
    command -v python3 >/dev/null || { echo "setup-examples: no python3" >&2; exit 1; }
    env=target/example-env
    if ! "$env/bin/python" -c 'import redis' 2>/dev/null; then
        rm -rf "$env"
        if ! python3 -m venv "$env" 2>/dev/null; then
            # Debian ships the venv module apart from python3.
            if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
                rm -rf "$env"
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 ||
                    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }
            fi
            rm -rf "$env"
            python3 -m venv "$env" || { echo "setup-examples: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
        fi
        "$env/bin/pip" install -q -r examples/python/requirements.txt || exit 1
    fi
    ;;
node)
    command -v node >/dev/null && command -v npm >/dev/null || { echo "setup-examples: no node/npm" >&2; exit 1; }
    if [ ! -d examples/node/node_modules/redis ]; then
        (cd examples/node && npm ci --no-audit --no-fund --silent) || exit 1
    fi
    ;;
*)
    echo "usage: scripts/setup-examples.sh python|node" >&2
    exit 2
    ;;
esac
