"""The store: the only package that issues SQL."""

from gateway.store.engine import Database, as_utc, dumps, utcnow

__all__ = ["Database", "as_utc", "dumps", "utcnow"]
