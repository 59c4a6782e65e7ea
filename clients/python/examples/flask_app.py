"""Flask with Flask-Limiter on redis-swl: the moving window is exact, one
command per hit. The one change from a plain Flask-Limiter app is the
storage URI (and the import that registers it).

    pip install "redis-swl[limits]" flask flask-limiter
    REDIS_URL=swl+redis://localhost:6379 flask --app flask_app run --port 5000
"""

import os

from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

import redis_swl  # noqa: F401  (registers swl+redis:// with limits)


def create_app(storage_uri: str, **limiter_options) -> Flask:
    app = Flask(__name__)
    limiter = Limiter(
        get_remote_address,  # the TCP peer; behind a proxy see docs/python.md
        app=app,
        storage_uri=storage_uri,
        strategy="moving-window",
        **{"headers_enabled": True, "default_limits": ["3 per minute;10 per hour"],
           **limiter_options},
    )

    @app.get("/")
    def index():
        return "hello\n"

    @app.get("/burst")
    @limiter.limit("5/second", override_defaults=True)
    def burst():
        return "burst\n"

    # Only successful answers count: a 404 is given back (tested first,
    # hit after the response).
    @app.get("/lookup/<name>")
    @limiter.limit("2 per minute", override_defaults=True,
                   deduct_when=lambda response: response.status_code == 200)
    def lookup(name):
        if name != "known":
            return "no such name\n", 404
        return "found\n"

    app.extensions["swl_limiter"] = limiter
    return app


app = create_app(os.environ.get("REDIS_URL", "swl+redis://localhost:6379"))
