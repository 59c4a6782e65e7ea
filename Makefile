# make run   build the module and start redis-server with it on 127.0.0.1,
#            keeping nothing across restarts (PORT=6379; BIND=0.0.0.0 to
#            listen on every interface; ARGS='--requirepass ...' for more
#            redis-server arguments)
# make test  unit tests, integration tests against real redis-server, the
#            FastAPI, Express and axum middleware over real HTTP, the
#            Python package (clients/python) with limits, Flask-Limiter and
#            slowapi, the Node package (clients/node) with
#            express-rate-limit and rate-limiter-flexible, and the Rust
#            crate (clients/rust) with its axum layer, packaged as
#            cargo package checks it, the Go module (clients/go)
#            with go test -race, and the Envoy rate limit service (rls/)
#            behind a real Envoy
# make bench SWL.CHECK against PING, ZADD and the usual Lua script (scripts/bench.sh),
#            then Python limits' moving window against swl+redis://, then
#            express-rate-limit and rate-limiter-flexible's fixed windows
#            against SwlStore and RateLimiterSwl, then the Rust layer on
#            axum against the bare app and tower_governor, then the Go
#            ulule/limiter store against ulule's own Redis store, then
#            swl-rls under load, and through Envoy with wrk
# make lint  rustfmt and clippy, as CI checks them
# make library  scripts/swl.lua built anew from its modules in lua/
#            (scripts/build-library.sh); commit both
# make dist  every file of a release into dist/ (scripts/dist.sh): the
#            module and swl-rls for Linux x86_64 and aarch64, glibc 2.17+
#            and musl, the function library, the Python, Node and Rust
#            packages, SHA256SUMS
# make dist-test  checks them as a user meets them (scripts/dist-test.py)
# run, test, bench and dist install what is missing first (scripts/setup*.sh).

PORT ?= 6379
# Loopback only unless told otherwise: a server for trying things out has
# no password.
BIND ?= 127.0.0.1
CARGO ?= cargo
# SWL_MODULE, where set, names another build to load, as the tests take it
# (make test's, which tests/docs.rs serves with make serve).
MODULE := $(abspath $(or $(SWL_MODULE),target/release/libredis_swl.so))

.PHONY: setup build run serve test bench lint module library dist dist-test

setup:
	@bash scripts/setup.sh

build: setup
	$(CARGO) build --release --lib

# A server for trying things out: it saves nothing (--save ''), so every
# make run starts empty, and what it writes goes to target/run, not into
# the source tree.
RUN_DIR ?= target/run
ARGS ?=
run: build
	@$(MAKE) --no-print-directory serve

# The server `make run` starts, without the build (tests start it so).
serve:
	mkdir -p $(RUN_DIR)
	exec redis-server --port $(PORT) --bind $(BIND) --save '' --dir $(abspath $(RUN_DIR)) --loadmodule $(MODULE) $(ARGS)

# The function library from its modules (tests/library.rs checks that the
# committed scripts/swl.lua is this build).
library:
	bash scripts/build-library.sh

# The tests load the module as releases ship it.
test: MODULE = $(RELEASE_MODULE)
test: module lint
	SWL_MODULE=$(MODULE) $(CARGO) test --all-targets
	bash scripts/setup-python.sh
	cd clients/python && SWL_MODULE=$(MODULE) PYTHONDONTWRITEBYTECODE=1 \
		../../target/python/bin/python -m pytest -q -p no:cacheprovider tests
	bash scripts/setup-node.sh
	cd clients/node && SWL_MODULE=$(MODULE) node --test test/*.test.js
	CARGO_TARGET_DIR=$(CLIENT_TARGET) SWL_MODULE=$(MODULE) $(CARGO) test $(CLIENT) --all-features
	CARGO_TARGET_DIR=$(CLIENT_TARGET) $(CARGO) package $(CLIENT) --allow-dirty --quiet
	bash scripts/setup-go.sh
	cd clients/go && test -z "$$(gofmt -l .)" && go vet ./... && go mod tidy -diff
	cd clients/go && SWL_MODULE=$(MODULE) go test -race -count=1 ./...
	bash scripts/setup-envoy.sh
	CARGO_TARGET_DIR=$(RLS_TARGET) SWL_MODULE=$(MODULE) ENVOY=$(ENVOY) $(CARGO) test $(RLS)

bench: build
	SWL_MODULE=$(MODULE) bash scripts/bench.sh
	bash scripts/setup-python.sh
	SWL_MODULE=$(MODULE) PYTHONDONTWRITEBYTECODE=1 target/python/bin/python clients/python/bench/limits_bench.py
	bash scripts/setup-node.sh
	cd clients/node && SWL_MODULE=$(MODULE) node bench/bench.js
	CARGO_TARGET_DIR=$(CLIENT_TARGET) SWL_MODULE=$(MODULE) $(CARGO) run $(CLIENT) --release --quiet --all-features --example bench
	bash scripts/setup-go.sh
	cd clients/go && SWL_MODULE=$(MODULE) go test ./internal/bench -run '^$$' -bench . -benchtime 1x
	bash scripts/setup-envoy.sh bench
	CARGO_TARGET_DIR=$(RLS_TARGET) SWL_MODULE=$(MODULE) ENVOY=$(ENVOY) $(CARGO) bench $(RLS) --bench load

# The Rust client crate, the axum example and the Envoy rate limit
# service are projects of their own, each with its own target directory.
CLIENT := --manifest-path clients/rust/Cargo.toml
CLIENT_TARGET := $(abspath target/clients-rust)
RLS := --manifest-path rls/Cargo.toml
RLS_TARGET := $(abspath target/rls)
ENVOY := $(abspath target/envoy/bin/envoy)
AXUM := --manifest-path examples/axum/Cargo.toml
lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets --quiet -- -D warnings
	$(CARGO) fmt --check $(AXUM)
	CARGO_TARGET_DIR=$(abspath target/middleware/axum) $(CARGO) clippy $(AXUM) --all-targets --quiet -- -D warnings
	$(CARGO) fmt --check $(CLIENT)
	CARGO_TARGET_DIR=$(CLIENT_TARGET) $(CARGO) clippy $(CLIENT) --all-features --all-targets --quiet -- -D warnings
	CARGO_TARGET_DIR=$(CLIENT_TARGET) $(CARGO) clippy $(CLIENT) --all-targets --quiet -- -D warnings
	$(CARGO) fmt --check $(RLS)
	CARGO_TARGET_DIR=$(RLS_TARGET) $(CARGO) clippy $(RLS) --all-targets --quiet -- -D warnings

# The module for this machine as releases ship it (zig, glibc 2.17),
# checked from its headers; make dist builds every platform's.
ARCH := $(shell uname -m)
RELEASE_MODULE := $(abspath target/$(ARCH)-unknown-linux-gnu/release/libredis_swl.so)
module: setup
	bash scripts/build-module.sh $(ARCH)-gnu

dist:
	bash scripts/dist.sh

dist-test:
	python3 scripts/dist-test.py
