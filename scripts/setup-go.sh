#!/usr/bin/env bash
# The Go module's test environment: Go itself (installs golang-go with
# apt-get where it is missing and this runs as root on Debian; a Go older
# than clients/go/go.mod's go line fetches the newer toolchain itself) and
# the module's dependencies, pinned by clients/go/go.sum, in Go's module
# cache. Then go test -race ./... in clients/go runs the tests (against
# the module at SWL_MODULE, or target/release/libredis_swl.so).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v go >/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "setup-go: installing golang-go with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq golang-go >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq golang-go >/dev/null; }
    else
        echo "setup-go: go is missing (Debian: apt-get install golang-go; or https://go.dev/dl/)" >&2
        exit 1
    fi
fi

module=clients/go
(cd "$module" && go mod download && go mod verify >/dev/null)
# The library the module embeds is a copy of scripts/swl.lua (Go embeds no
# file outside the module): say so where it is out of date.
if ! cmp -s scripts/swl.lua "$module/swl.lua"; then
    echo "setup-go: $module/swl.lua differs from scripts/swl.lua: run go generate in $module" >&2
fi
