"""FastAPI with slowapi on redis-swl. The one change from a plain slowapi
app is the storage URI (and the import that registers it).

    pip install "redis-swl[limits]" fastapi slowapi uvicorn
    REDIS_URL=swl+redis://localhost:6379 uvicorn slowapi_app:app --port 8000
"""

import os

from fastapi import FastAPI, Request, Response
from fastapi.responses import PlainTextResponse
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address

import redis_swl  # noqa: F401  (registers swl+redis:// with limits)


def create_app(storage_uri: str, **limiter_options) -> FastAPI:
    limiter = Limiter(
        key_func=get_remote_address,  # the TCP peer; behind a proxy see docs/python.md
        storage_uri=storage_uri,
        strategy="moving-window",
        **{"headers_enabled": True, "default_limits": ["3 per minute;10 per hour"],
           **limiter_options},
    )
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)

    # slowapi 0.1.10 reads request.state.view_rate_limit after every
    # decorated endpoint, and a check it swallowed (swallow_errors, Redis
    # unreachable) never set it: the request would fail with a 500. None
    # means "no limit to report".
    @app.middleware("http")
    async def no_limit_to_report_yet(request: Request, call_next):
        request.state.view_rate_limit = None
        return await call_next(request)

    # slowapi writes its headers into `response`.
    @app.get("/", response_class=PlainTextResponse)
    @limiter.limit("3 per minute;10 per hour")
    async def index(request: Request, response: Response):
        return "hello\n"

    @app.get("/burst", response_class=PlainTextResponse)
    @limiter.limit("5/second")
    async def burst(request: Request, response: Response):
        return "burst\n"

    return app


app = create_app(os.environ.get("REDIS_URL", "swl+redis://localhost:6379"))
