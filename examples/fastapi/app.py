"""A tiny FastAPI service behind RateLimitMiddleware. Settings from the
environment: REDIS_URL, PORT, WINDOWS ("60000:100,1000:10"), COST, POLICY
(open, closed or local), TIMEOUT_MS (50), LOCAL_MAX_CLIENTS."""

import os

import uvicorn
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from ratelimit import RateLimitMiddleware

windows = [tuple(int(n) for n in pair.split(":")) for pair in os.environ.get("WINDOWS", "60000:100").split(",")]
app = FastAPI()
app.add_middleware(
    RateLimitMiddleware,
    redis_url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"),
    windows=windows,
    cost=int(os.environ.get("COST", "1")),
    policy=os.environ.get("POLICY", "open"),
    timeout=int(os.environ.get("TIMEOUT_MS", "50")) / 1000,
    max_local_clients=int(os.environ.get("LOCAL_MAX_CLIENTS", "10000")),
)


@app.get("/", response_class=PlainTextResponse)
def hello():
    return "hello\n"


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")), log_level="warning")
