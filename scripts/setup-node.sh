#!/usr/bin/env bash
# The Node package's test environment: clients/node/node_modules from its
# package-lock.json by npm ci (made anew when the lock file changes), and
# the function library copied into the package (scripts/swl.lua, as packing
# copies it). Installs nodejs and npm with apt-get where they are missing
# and this runs as root on Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "setup-node: installing nodejs and npm with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq nodejs npm >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
    else
        echo "setup-node: node and npm are missing (Debian: apt-get install nodejs npm)" >&2
        exit 1
    fi
fi

package=clients/node
if ! cmp -s "$package/package-lock.json" "$package/node_modules/.redis-swl-lock.json"; then
    (cd "$package" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$package/package-lock.json" "$package/node_modules/.redis-swl-lock.json"
fi
node "$package/scripts/copy-library.js"
