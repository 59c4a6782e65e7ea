#!/usr/bin/env bash
# Installs what one middleware example needs, if this machine has its
# language runtime: FastAPI, uvicorn, redis-py and the redis-swl package
# (built from clients/python each time) in a virtual environment under
# target/, Express and the redis-swl package (clients/node, with its
# dependencies) with npm ci, the axum example built
# with cargo into its own target directory, the net/http example built
# with go into target/middleware/go. Exit 3: the runtime itself is
# missing (the caller skips, saying so); other failures exit 1.
# Usage: scripts/setup-examples.sh python|node|rust|go
set -uo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
python)
    command -v python3 >/dev/null || { echo "setup-examples: no python3" >&2; exit 3; }
    env=target/middleware/python
    # Made anew when the app's requirements change, as setup-python.sh does.
    if ! cmp -s examples/fastapi/requirements.txt "$env/requirements.txt" ||
        ! "$env/bin/python" -c 'import fastapi, uvicorn, redis, hatchling' 2>/dev/null; then
        rm -rf "$env"
        if ! python3 -m venv "$env" 2>/dev/null; then
            # Debian ships the venv module apart from python3.
            if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 ||
                    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }
            fi
            rm -rf "$env"
            python3 -m venv "$env" || { echo "setup-examples: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
        fi
        "$env/bin/pip" install -q -r examples/fastapi/requirements.txt hatchling==1.27.0 || exit 1
        cp examples/fastapi/requirements.txt "$env/requirements.txt"
    fi
    "$env/bin/pip" install -q --no-build-isolation --force-reinstall --no-deps ./clients/python || exit 1
    ;;
node)
    { command -v node >/dev/null && command -v npm >/dev/null; } || { echo "setup-examples: no node/npm" >&2; exit 3; }
    # The example uses the package (a link to clients/node), with its
    # dependencies installed there.
    bash scripts/setup-node.sh || exit 1
    if ! cmp -s examples/express/package-lock.json examples/express/node_modules/.redis-swl-lock.json; then
        (cd examples/express && npm ci --no-audit --no-fund --loglevel=error) || exit 1
        cp examples/express/package-lock.json examples/express/node_modules/.redis-swl-lock.json
    fi
    ;;
go)
    # The Go example uses the module in clients/go (a replace directive),
    # with Go installed where it is missing, as make test installs it.
    bash scripts/setup-go.sh || exit 1
    (cd examples/go && go build -o ../../target/middleware/go/swl-nethttp .) || exit 1
    ;;
rust)
    command -v cargo >/dev/null || { echo "setup-examples: no cargo" >&2; exit 3; }
    (cd examples/axum && CARGO_TARGET_DIR="$PWD/../../target/middleware/axum" cargo build --release --quiet) || exit 1
    ;;
*)
    echo "usage: scripts/setup-examples.sh python|node|rust|go" >&2
    exit 2
    ;;
esac
