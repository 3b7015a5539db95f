"""Fenec's Python client: ``connect`` (blocking) or ``connect_async`` (asyncio),
a query builder that renders FenecQL, and a job worker (``Worker`` on
threads, ``AsyncWorker`` on asyncio).

    import fenecdb
    from fenecdb import expr, inc, raw

    db = fenecdb.connect("http://127.0.0.1:8080", token="a worker token")
    jobs = db.from_("jobs")
    claimed = (
        jobs.where(raw("run_at <= now()")).order("run_at").limit(10)
        .update({"owner": owner, "run_at": expr("now() + ?", 30000), "attempts": inc(1)},
                returning=True, wait=30)
    )
"""

from ._async.client import AsyncClient, AsyncCollection, AsyncConsumer, AsyncTypedCollection
from ._builder import Expr, Inc, Query, Raw, Returning, Statement, expr, inc, raw
from ._calls import DEFAULT_TIMEOUT
from ._calls import VERSION as __version__
from ._codec import Affected, Answer, Results, Row, Rows
from ._connect import connect, connect_async
from ._errors import ConnectionFailed, FenecError, NetworkError, StatusError, TimedOut, Timeout, UnexpectedAnswer
from ._generated import Change
from ._generated import Changes as ChangeBatch
from ._generated import (
    BadRequest,
    Behind,
    NoLeader,
    OriginNotAllowed,
    HostNotAllowed,
    RequestTimeout,
    TooManyConnections,
    ConsumerBusy,
    ChangesGone,
    Conflict,
    Forbidden,
    Internal,
    KeyLimit,
    KeyReused,
    MethodNotAllowed,
    NotFound,
    StatementTimeout,
    TooBusy,
    TooLarge,
    Unauthorized,
    Unavailable,
    Unmet,
)
from ._sync.client import Client, Collection, Consumer, TypedCollection
from ._worker import Backoff, LostLease, OnError, WorkerError, default_backoff
from ._async._runtime import AsyncHandler
from ._async.worker import AsyncWorker
from ._sync._runtime import Handler
from ._sync.worker import Worker
from . import live

__all__ = [
    "__version__",
    "DEFAULT_TIMEOUT",
    "Affected",
    "Answer",
    "AsyncClient",
    "AsyncCollection",
    "AsyncConsumer",
    "AsyncHandler",
    "AsyncTypedCollection",
    "AsyncWorker",
    "Backoff",
    "BadRequest",
    "Behind",
    "NoLeader",
    "OriginNotAllowed",
    "HostNotAllowed",
    "RequestTimeout",
    "TooManyConnections",
    "ConsumerBusy",
    "ChangesGone",
    "Client",
    "Collection",
    "Consumer",
    "Change",
    "ChangeBatch",
    "Conflict",
    "ConnectionFailed",
    "Expr",
    "FenecError",
    "Forbidden",
    "Handler",
    "Inc",
    "Internal",
    "KeyLimit",
    "KeyReused",
    "MethodNotAllowed",
    "NetworkError",
    "NotFound",
    "OnError",
    "Query",
    "Raw",
    "Results",
    "Returning",
    "Row",
    "Rows",
    "Statement",
    "StatementTimeout",
    "StatusError",
    "TimedOut",
    "Timeout",
    "TooBusy",
    "TooLarge",
    "TypedCollection",
    "Unauthorized",
    "Unavailable",
    "UnexpectedAnswer",
    "Unmet",
    "Worker",
    "WorkerError",
    "LostLease",
    "connect",
    "connect_async",
    "default_backoff",
    "expr",
    "inc",
    "live",
    "raw",
]
