"""The store's errors, as the rest of the gateway catches them (it never imports the driver
or SQLAlchemy): the database is busy or unreachable, or failed some other way."""

from __future__ import annotations

from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError

# Busy (a lock held too long) or unreachable (a restart, a network cut): worth a retry later.
UNAVAILABLE: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
DatabaseError = SQLAlchemyError  # anything the database or its driver raised

__all__ = ["UNAVAILABLE", "DatabaseError"]
