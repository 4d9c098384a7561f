"""The store: the only package that issues SQL."""

from gateway.store.changes import Changes
from gateway.store.engine import Database, Tx
from gateway.store.values import as_utc, dumps, utcnow

__all__ = ["Changes", "Database", "Tx", "as_utc", "dumps", "utcnow"]
