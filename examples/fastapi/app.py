"""A tiny FastAPI service behind redis-swl's ASGI middleware (the redis-swl
package: pip install ./clients/python). Settings from the environment
(docs/middleware.md): REDIS_URL (redis://127.0.0.1:6379/), PORT (8000),
WINDOWS ("60000:100"; several as "60000:100,1000:10"), COST (1), POLICY
(open, closed or local), TIMEOUT_MS (50), LOCAL_MAX_CLIENTS (10000),
DENIAL_CACHE (on or off). Serves /failures and /metrics (the Prometheus
text format) outside the limit."""

import os
import sys

import uvicorn
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from redis_swl.asgi import RateLimiter, RateLimitMiddleware, client_address

# Counters as the Rust app shows them: no *_created series.
disable_created_metrics()

denial_cache = os.environ.get("DENIAL_CACHE", "on")
if denial_cache not in ("on", "off"):
    sys.exit(f'DENIAL_CACHE: unknown setting "{denial_cache}" (accepted: on, off)')

windows = [tuple(int(n) for n in pair.split(":")) for pair in os.environ.get("WINDOWS", "60000:100").split(",")]
settings = dict(
    redis=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"),
    windows=windows,
    cost=int(os.environ.get("COST", "1")),
    policy=os.environ.get("POLICY", "open"),
    timeout=int(os.environ.get("TIMEOUT_MS", "50")) / 1000,
    max_local_clients=int(os.environ.get("LOCAL_MAX_CLIENTS", "10000")),
    # Who a request counts against: here the default, the client's address.
    # docs/middleware.md keys by an authenticated identity instead.
    key=client_address,
    # Denials are repeated by the process until their wait has passed.
    denial_cache_keys=10_000 if denial_cache == "on" else 0,
    # The label of its metrics, in prometheus_client's default registry.
    name="default",
)
try:
    limiter = RateLimiter(**settings)
except ValueError as error:  # an unknown policy
    sys.exit(f"POLICY: {error}")

# The limited API is an app of its own, so routes outside it, such as
# /failures and /metrics, answer even while the policy refuses everything else.
api = FastAPI()
api.add_middleware(RateLimitMiddleware, limiter=limiter)


@api.get("/", response_class=PlainTextResponse)
def hello():
    return "hello\n"


app = FastAPI()


@app.get("/failures", response_class=PlainTextResponse)
def failures():
    return f"{limiter.failures}\n"


@app.get("/metrics")
def metrics():
    # The text format every Prometheus reads, as the Rust app serves it.
    return Response(generate_latest(), media_type=CONTENT_TYPE_PLAIN_0_0_4)


app.mount("/", api)

if __name__ == "__main__":
    # proxy_headers=False: the client's address is the TCP peer, whatever
    # X-Forwarded-For says (uvicorn otherwise trusts it from 127.0.0.1).
    # Uvicorn says where it listens; the access log stays off.
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")),
                access_log=False, proxy_headers=False)
