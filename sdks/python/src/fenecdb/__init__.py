"""Fenec's Python client: ``connect`` (blocking) or ``connect_async`` (asyncio),
and a query builder that renders FenecQL.

    import fenecdb
    from fenecdb import expr, inc, raw

    db = fenecdb.connect("http://127.0.0.1:8080", token="a worker token")
    jobs = db.collection("jobs")
    claimed = (
        jobs.where(raw("run_at <= now()")).order("run_at").limit(10)
        .update({"owner": owner, "run_at": expr("now() + ?", 30000), "attempts": inc(1)},
                returning=True, wait=30)
    )
"""

from __future__ import annotations

from typing import Optional

from ._builder import Expr, Inc, Query, Raw, Returning, Statement, expr, inc, raw
from ._client import DEFAULT_TIMEOUT, AsyncClient, AsyncCollection, Client, Collection
from ._codec import Answer, Row
from ._errors import (
    BadRequest,
    Conflict,
    FenecError,
    Forbidden,
    Internal,
    KeyLimit,
    KeyReused,
    MethodNotAllowed,
    NotFound,
    StatementTimeout,
    TooLarge,
    Unauthorized,
    Unavailable,
    Unmet,
)

__all__ = [
    "Answer",
    "AsyncClient",
    "AsyncCollection",
    "BadRequest",
    "Client",
    "Collection",
    "Conflict",
    "Expr",
    "FenecError",
    "Forbidden",
    "Inc",
    "Internal",
    "KeyLimit",
    "KeyReused",
    "MethodNotAllowed",
    "NotFound",
    "Query",
    "Raw",
    "Returning",
    "Row",
    "Statement",
    "StatementTimeout",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "Unmet",
    "connect",
    "connect_async",
    "expr",
    "inc",
    "raw",
]


def connect(url: str, *, token: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT) -> Client:
    """A blocking client of the Fenec server at ``url``.

    ``token`` is sent as ``Authorization: Bearer <token>``; ``timeout`` is the
    seconds a request may take (``None``: no limit), and a request sent with
    ``wait=`` may take that much longer."""
    return Client(url, token=token, timeout=timeout)


def connect_async(url: str, *, token: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT) -> AsyncClient:
    """An asyncio client of the Fenec server at ``url``; use it with
    ``async with``. Arguments as :func:`connect`."""
    return AsyncClient(url, token=token, timeout=timeout)
