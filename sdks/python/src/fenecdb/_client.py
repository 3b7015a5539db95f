"""The clients: ``Client`` (blocking) and ``AsyncClient`` (asyncio), over
httpx, sending what the builder renders to the routes of openapi.yaml."""

from __future__ import annotations

from types import TracebackType
from typing import Any, List, Literal, Mapping, Optional, Sequence, Type, TypeVar, Union, overload

import httpx

from . import _generated as api
from ._builder import Query, Returning, Statement
from ._codec import Answer, Row, decode_answer, to_json
from ._errors import error_for

DEFAULT_TIMEOUT = 10.0
"""Seconds a request may take, unless ``connect(..., timeout=)`` says otherwise."""

Doc = Mapping[str, Any]
StatementLike = Union[Statement, str]
_T = TypeVar("_T")


class _Base:
    """What both clients share: the headers, body and timeout of each call,
    and what its answer means."""

    def __init__(self, token: Optional[str], timeout: Optional[float]) -> None:
        self._token = token
        self._timeout = timeout

    def _headers(self, wait: Optional[float], idempotency_key: Optional[str]) -> api.QueryHeaders:
        headers: api.QueryHeaders = {}
        if wait is not None:
            if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0:
                raise ValueError(f"wait is a number of seconds (0 to 30), got {wait!r}")
            headers["fenec_wait"] = round(wait * 1000)
        if idempotency_key is not None:
            headers["idempotency_key"] = idempotency_key
        return headers

    def _timeout_for(self, wait: Optional[float]) -> httpx.Timeout:
        """The client's timeout; a held claim's answer is awaited as much
        longer as it may be held."""
        if self._timeout is None or not wait:
            return httpx.Timeout(self._timeout)
        return httpx.Timeout(self._timeout, read=self._timeout + wait)

    @staticmethod
    def _answer(reply: api.Reply[_T]) -> _T:
        if not reply.ok or reply.body is None:
            raise error_for(reply.status, reply.body, reply.text)
        return reply.answer()

    @staticmethod
    def _query_body(statement: StatementLike, params: Sequence[Any] = ()) -> api.QueryRequest:
        if isinstance(statement, str):
            return {"query": statement, "params": to_json(list(params))}
        if params:
            raise TypeError("a Statement carries its own params")
        return {"query": statement.query, "params": to_json(list(statement.params))}


class Client(_Base):
    """A blocking connection to a Fenec server; make one with
    :func:`fenecdb.connect`. Safe to share between threads. Close it (or use
    ``with``) to release its connections. ``transport`` replaces httpx's
    (``httpx.MockTransport`` in tests)."""

    def __init__(
        self,
        url: str,
        *,
        token: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        transport: Optional[httpx.BaseTransport] = None,
    ) -> None:
        super().__init__(token, timeout)
        self._http = httpx.Client(base_url=url, transport=transport, timeout=timeout)

    def collection(self, name: str) -> Collection:
        """A query on the collection ``name`` (an identifier)."""
        return Collection(name, self)

    from_ = collection

    def query(
        self,
        statement: StatementLike,
        params: Sequence[Any] = (),
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> Answer:
        """Run one FenecQL statement with its ``$1…$n`` ``params``; answers its
        rows, or a write's count. ``wait`` holds a ``set``/``del`` at the
        server up to that many seconds while it would take nothing."""
        reply = api.query(
            self._http,
            self._query_body(statement, params),
            self._headers(wait, idempotency_key),
            token=self._token,
            timeout=self._timeout_for(wait),
        )
        return decode_answer(self._answer(reply))

    def batch(
        self,
        statements: Sequence[StatementLike],
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> List[Answer]:
        """Run statements all or nothing, under one lock; answers each one's
        answer. A refusal's :class:`FenecError` names the statement in ``at``."""
        reply = api.batch(
            self._http,
            {"statements": [self._query_body(s) for s in statements]},
            self._headers(wait, idempotency_key),
            token=self._token,
            timeout=self._timeout_for(wait),
        )
        return [decode_answer(a) for a in self._answer(reply)["results"]]

    def health(self) -> bool:
        """Whether the server is up."""
        return self._answer(api.health(self._http))["ok"]

    def collections(self) -> List[api.Collection]:
        """Every collection, with its fields, their types and indexes."""
        return self._answer(api.collections(self._http, token=self._token))["collections"]

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()


class AsyncClient(_Base):
    """An asyncio connection to a Fenec server; make one with
    :func:`fenecdb.connect_async` and use it with ``async with``. Cancelling
    a task gives its request up: a claim held at the server is released."""

    def __init__(
        self,
        url: str,
        *,
        token: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        transport: Optional[httpx.AsyncBaseTransport] = None,
    ) -> None:
        super().__init__(token, timeout)
        self._http = httpx.AsyncClient(base_url=url, transport=transport, timeout=timeout)

    def collection(self, name: str) -> AsyncCollection:
        """A query on the collection ``name`` (an identifier)."""
        return AsyncCollection(name, self)

    from_ = collection

    async def query(
        self,
        statement: StatementLike,
        params: Sequence[Any] = (),
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> Answer:
        """Run one FenecQL statement; see :meth:`Client.query`."""
        reply = await api.query_async(
            self._http,
            self._query_body(statement, params),
            self._headers(wait, idempotency_key),
            token=self._token,
            timeout=self._timeout_for(wait),
        )
        return decode_answer(self._answer(reply))

    async def batch(
        self,
        statements: Sequence[StatementLike],
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> List[Answer]:
        """Run statements all or nothing; see :meth:`Client.batch`."""
        reply = await api.batch_async(
            self._http,
            {"statements": [self._query_body(s) for s in statements]},
            self._headers(wait, idempotency_key),
            token=self._token,
            timeout=self._timeout_for(wait),
        )
        return [decode_answer(a) for a in self._answer(reply)["results"]]

    async def health(self) -> bool:
        """Whether the server is up."""
        return self._answer(await api.health_async(self._http))["ok"]

    async def collections(self) -> List[api.Collection]:
        """Every collection, with its fields, their types and indexes."""
        return self._answer(await api.collections_async(self._http, token=self._token))["collections"]

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.aclose()


def _rows(answer: Answer) -> List[Row]:
    if isinstance(answer, int):
        raise ValueError("expected rows, got a count")
    return answer


def _affected(answer: Answer) -> int:
    if not isinstance(answer, int):
        raise ValueError("expected a count, got rows")
    return answer


def _count(answer: Answer) -> int:
    return int(_rows(answer)[0]["count"])


class Collection(Query[Client]):
    """A query on one collection of a :class:`Client`: immutable, each method
    answers a new one. Its endpoints send the statement it renders."""

    def rows(self) -> List[Row]:
        """The rows: ``get c [select …] [where …] [order …] [limit n] [offset n]``."""
        return _rows(self.db.query(self.render_rows()))

    def first(self) -> Optional[Row]:
        """The first row, or ``None``."""
        rows = _rows(self.db.query(self.render_first()))
        return rows[0] if rows else None

    def count(self) -> int:
        """How many rows match."""
        return _count(self.db.query(self.render_count()))

    def insert(self, docs: Union[Doc, Sequence[Doc]], *, idempotency_key: Optional[str] = None) -> int:
        """Insert a document or a list of them; answers how many. A taken id
        or ``@unique`` value raises :class:`Conflict` and writes nothing."""
        return _affected(self.db.query(self.render_insert(docs), idempotency_key=idempotency_key))

    @overload
    def update(
        self,
        patch: Doc,
        *,
        returning: Literal[False] = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> int: ...

    @overload
    def update(
        self,
        patch: Doc,
        *,
        returning: Union[Literal[True], Sequence[str]],
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> List[Row]: ...

    def update(
        self,
        patch: Doc,
        *,
        returning: Returning = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> Union[int, List[Row]]:
        """Write ``patch`` into the matching rows (``set``): values, ``None``,
        ``expr(...)`` or ``inc(n)``. Answers the count, or with ``returning``
        the rows as written. ``require=n`` raises :class:`Unmet` unless exactly
        n rows; ``wait`` holds the claim at the server up to that many seconds
        while it would take nothing."""
        stmt = self.render_update(patch, returning=returning, require=require)
        return self.db.query(stmt, wait=wait, idempotency_key=idempotency_key)

    @overload
    def delete(
        self,
        *,
        returning: Literal[False] = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> int: ...

    @overload
    def delete(
        self,
        *,
        returning: Union[Literal[True], Sequence[str]],
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> List[Row]: ...

    def delete(
        self,
        *,
        returning: Returning = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> Union[int, List[Row]]:
        """Delete the matching rows (``del``); options as :meth:`update`."""
        stmt = self.render_delete(returning=returning, require=require)
        return self.db.query(stmt, wait=wait, idempotency_key=idempotency_key)


class AsyncCollection(Query[AsyncClient]):
    """A query on one collection of an :class:`AsyncClient`: as
    :class:`Collection`, its endpoints awaited."""

    async def rows(self) -> List[Row]:
        """The rows; see :meth:`Collection.rows`."""
        return _rows(await self.db.query(self.render_rows()))

    async def first(self) -> Optional[Row]:
        """The first row, or ``None``."""
        rows = _rows(await self.db.query(self.render_first()))
        return rows[0] if rows else None

    async def count(self) -> int:
        """How many rows match."""
        return _count(await self.db.query(self.render_count()))

    async def insert(self, docs: Union[Doc, Sequence[Doc]], *, idempotency_key: Optional[str] = None) -> int:
        """Insert a document or a list of them; see :meth:`Collection.insert`."""
        return _affected(await self.db.query(self.render_insert(docs), idempotency_key=idempotency_key))

    @overload
    async def update(
        self,
        patch: Doc,
        *,
        returning: Literal[False] = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> int: ...

    @overload
    async def update(
        self,
        patch: Doc,
        *,
        returning: Union[Literal[True], Sequence[str]],
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> List[Row]: ...

    async def update(
        self,
        patch: Doc,
        *,
        returning: Returning = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> Union[int, List[Row]]:
        """Write ``patch`` into the matching rows; see :meth:`Collection.update`.
        Cancelling the task gives a held claim up."""
        stmt = self.render_update(patch, returning=returning, require=require)
        return await self.db.query(stmt, wait=wait, idempotency_key=idempotency_key)

    @overload
    async def delete(
        self,
        *,
        returning: Literal[False] = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> int: ...

    @overload
    async def delete(
        self,
        *,
        returning: Union[Literal[True], Sequence[str]],
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> List[Row]: ...

    async def delete(
        self,
        *,
        returning: Returning = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> Union[int, List[Row]]:
        """Delete the matching rows; see :meth:`Collection.delete`."""
        stmt = self.render_delete(returning=returning, require=require)
        return await self.db.query(stmt, wait=wait, idempotency_key=idempotency_key)
