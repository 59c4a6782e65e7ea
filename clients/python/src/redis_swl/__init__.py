"""redis-swl for Python: exact sliding-window-log rate limiting on Redis.

:class:`SWL` and :class:`AsyncSWL` call the redis-swl module where the
server has it and its function library otherwise. Importing this package
also registers the ``swl+redis://`` storages with ``limits`` (Flask-Limiter,
slowapi) where ``limits`` is installed (``pip install redis-swl[limits]``).
"""

from importlib.metadata import version as _version

from ._protocol import UncertainOutcomeError, Usage, Verdict, Window, library_source
from .aio import AsyncSWL
from .cache import DenialCache
from .client import SWL

__all__ = [
    "SWL", "AsyncSWL", "DenialCache", "UncertainOutcomeError", "Usage", "Verdict", "Window",
    "library_source"]
# The installed distribution's, which hatch_build.py takes from Cargo.toml.
__version__ = _version("redis-swl")

try:
    import limits as _limits  # noqa: F401
except ImportError:  # the [limits] extra is not installed
    pass
else:
    from . import limits_storage as _limits_storage  # noqa: F401  (registers the schemes)
