"""The asyncio client (``AsyncClient``) and its collection builder. Written
once: the blocking twin ``fenecdb/_sync/client.py`` is generated from this
file by unasync (``make generate``); what both share is in ``_calls.py``."""

from __future__ import annotations

import dataclasses
import threading
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Dict, Generic, List, Literal, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union, overload

import urllib.request
from urllib.parse import urlencode, urlsplit

import httpcore
import httpx

from .. import _calls as calls
from .. import _generated as api
from .. import _streams as streams
from .._builder import Query, Returning
from .._calls import DEFAULT, DEFAULT_TIMEOUT, StatementLike
from .._codec import Affected, Answer, Results, Row, Rows, check_kind, doc_of, row_as
from .._errors import FenecError

Doc = Mapping[str, Any]

R = TypeVar("R")
"""The type of a typed collection's rows (``db.from_("jobs", Job)``)."""


LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)
"""As many idle connections kept as may be open: httpcore 1.0 counts every
pooled connection as idle when it trims to the keep-alive limit (20 by
default), and under more threads than that it closed a connection another
thread had just been handed, mid-request (a worker at concurrency 50 saw
EBADF on acks, and the server a body cut short: a 400). Keeping the two
limits equal leaves nothing to trim."""


def _lean(node: str) -> bool:
    """Whether a node's requests go over :mod:`fenecdb._streams`: a plain
    ``http://`` node that no proxy of the environment (``HTTP_PROXY``,
    ``NO_PROXY``) covers — httpx's own transport takes the rest."""
    if not node.startswith("http://"):
        return False
    proxies = urllib.request.getproxies()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(urlsplit(node).netloc))


def _lean_transport() -> httpx.AsyncBaseTransport:
    """httpx's transport on httpcore's pool, over :mod:`fenecdb._streams`."""
    transport = httpx.AsyncHTTPTransport(limits=LIMITS)
    transport._pool = streams.AsyncPool(
        max_connections=LIMITS.max_connections,
        max_keepalive_connections=LIMITS.max_keepalive_connections,
        keepalive_expiry=LIMITS.keepalive_expiry,
        network_backend=streams.AsyncBackend(),
    )
    return transport


class _Http(httpx.AsyncClient):
    """httpx's client, whose :meth:`send` takes the SDK's own requests —
    read whole, with no auth flow and no redirects to follow — straight to
    the transport httpx picked for the URL (its mounts and proxies, or the
    user's ``transport``). httpx's ``send`` runs an auth generator, a
    redirect loop, event hooks and a cookie jar around each request: more
    CPU than the request itself on a loaded worker (docs/workers.md). A
    ``Set-Cookie`` is still kept, so a proxy's sticky sessions hold."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._urls: Dict[str, httpx.URL] = {}
        self._merged: Dict[Tuple[bytes, Tuple[Tuple[str, str], ...]], httpx.Headers] = {}

    def build_request(self, method: str, url: Any, **kwargs: Any) -> httpx.Request:
        """httpx's, but for the SDK's own requests — a route's path, a
        body, headers — the route's URL is merged with the base once and
        kept, and so are the headers merged with the client's, Host among
        them (httpx parses them all again on every request; a Request
        copies them)."""
        content, headers = kwargs.pop("content", None), kwargs.pop("headers", None)
        timeout = kwargs.pop("timeout", httpx.USE_CLIENT_DEFAULT)
        if kwargs or not isinstance(url, str) or self.cookies or self.params or not isinstance(content, (bytes, type(None))):
            return super().build_request(method, url, content=content, headers=headers, timeout=timeout, **kwargs)
        full = self._urls.get(url)
        if full is None:
            full = self._urls[url] = super().build_request(method, url).url
        key = (full.netloc, tuple(headers.items()) if headers else ())  # Host is among them
        merged = self._merged.get(key)
        if merged is None:
            if len(self._merged) >= 64:  # an Idempotency-Key each: not kept long
                self._merged.clear()
            # Host first, as httpx's Request puts it (a Host among the
            # headers given takes its value, in its place).
            merged = self._merged[key] = httpx.Headers({"Host": full.netloc.decode("ascii")})
            merged.update(self.headers)
            if headers:
                merged.update(headers)
        limit = self.timeout if timeout is httpx.USE_CLIENT_DEFAULT else httpx.Timeout(timeout)
        # The body as a stream, with its Content-Length put here: a Request
        # given content= looks each of its headers up again (a scan of them
        # all, every time) to add what the merged ones hold already.
        body = content or b""
        request = httpx.Request(method, full, headers=merged, stream=httpx.ByteStream(body), extensions={"timeout": limit.as_dict()})
        if body:
            request.headers["Content-Length"] = str(len(body))
        elif method in ("POST", "PUT", "PATCH"):  # where httpx puts it: after Host
            raw = request.headers.raw
            request.headers = httpx.Headers(raw[:1] + [(b"Content-Length", b"0")] + raw[1:])
        request.read()  # as content= has it: request.content is there
        return request

    async def send(
        self,
        request: httpx.Request,
        *,
        stream: bool = False,
        auth: Any = httpx.USE_CLIENT_DEFAULT,
        follow_redirects: Any = httpx.USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        pick: Optional[Callable[[httpx.URL], httpx.AsyncBaseTransport]] = getattr(self, "_transport_for_url", None)
        if (
            stream
            or auth is not httpx.USE_CLIENT_DEFAULT
            or follow_redirects is not httpx.USE_CLIENT_DEFAULT
            or pick is None
            or self.is_closed  # httpx's send says so
        ):
            return await super().send(request, stream=stream, auth=auth, follow_redirects=follow_redirects)
        try:
            response = await pick(request.url).handle_async_request(request)
        except httpx.RequestError as e:
            e.request = request
            raise
        response.request = request
        try:
            await response.aread()
        except BaseException:
            await response.aclose()
            raise
        if response.headers.get("content-type", "").startswith("application/json"):
            # JSON is UTF-8 (RFC 8259): httpx would find the charset by
            # parsing the header with the email package, on every answer.
            response.encoding = "utf-8"
        if "set-cookie" in response.headers:
            self.cookies.extract_cookies(response)
        return response


class AsyncClient:
    """A connection to a Fenec server; make one with
    :func:`fenecdb.connect_async` and use it with ``async with``.

    ``url`` is ``http(s)://host[:port]`` (checked now), or a cluster's nodes:
    several such URLs, comma-separated or a sequence — the client follows
    the leader and finds another node when one is down (docs/sdks.md,
    "Several nodes"); ``token`` is sent as
    ``Authorization: Bearer <token>``; ``timeout`` is the seconds a call may
    take (default 30; ``None``: no limit), which a call's own ``timeout=``
    replaces; ``verify``, ``proxy``, ``headers``, ``transport`` and
    ``max_retries`` are as :func:`fenecdb.connect` has them. Cancelling a task gives its request up: a claim held at
    the server is released."""

    def __init__(
        self,
        url: Union[str, Sequence[str], None] = None,
        *,
        token: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        verify: calls.Verify = True,
        transport: Optional[httpx.AsyncBaseTransport] = None,
        proxy: Optional[str] = None,
        headers: Optional[Mapping[str, str]] = None,
        max_retries: int = 0,
    ) -> None:
        self._settings = calls.Settings(url, token, timeout)
        self._transport = transport
        self._config = calls.Config.make(verify, proxy, headers, max_retries)
        self._start()

    def _start(self) -> None:
        first = self._settings.nodes.current
        # One httpx client per node (its base URL), made when first sent to.
        self._https: Dict[str, httpx.AsyncClient] = {first: self._http_client(first)}
        self._lock = threading.Lock()

    @classmethod
    def _twin(
        cls, config: calls.Config, settings: calls.Settings, transport: Optional[httpx.AsyncBaseTransport]
    ) -> AsyncClient:
        """A client of another client's configuration and settings (its
        nodes, token and the field types it learnt, shared): the threaded
        worker's claims go over an asyncio one."""
        twin = cls.__new__(cls)
        twin._settings, twin._config, twin._transport = settings, config, transport
        twin._start()
        return twin

    def _http_client(self, node: str) -> httpx.AsyncClient:
        transport = self._transport
        if transport is None and self._config.proxy is None and _lean(node):
            transport = _lean_transport()
        return _Http(
            base_url=node,
            transport=transport,
            timeout=self._settings.timeout,
            verify=self._config.ssl,
            proxy=self._config.proxy,
            headers=self._config.headers,
            limits=LIMITS,
        )

    @property
    def node(self) -> str:
        """The URL of the node this client sends to now: the first given, or
        the leader it was last sent to."""
        return self._settings.nodes.current

    async def _send(self, call: calls.Call, send: calls.SendAsync) -> Tuple[calls.Call, api.Reply[Any]]:
        """Sends a request to the current node, and on to others as
        :class:`calls.Walk` says; answers the reply that is the call's and
        the call as sent (its host)."""
        walk = calls.Walk(self._settings, call)
        while True:
            try:
                reply = await send(self._node_client(walk.node), walk.timeout())
            except httpx.HTTPError as e:
                await calls.sleep_async(walk.failed(e))
                continue
            pause = walk.answered(reply)
            if pause is None:
                return walk.call, reply
            await calls.sleep_async(pause)

    async def _asked(
        self, call: calls.Call, retry: calls.Retry, send: calls.AskAsync
    ) -> Tuple[calls.Call, api.Reply[Any], Any]:
        """Sends a query or a batch — again after a fault, as ``max_retries``
        allows, a write only under its idempotency key (generated when the
        call gave none) — and returns the call as sent, its reply and the
        answer's body. The error raised names what was asked."""
        while True:
            try:
                sent, reply = await self._send(call, lambda http, t: send(http, call, t))
                return sent, reply, calls.answered(sent, reply)
            except FenecError as e:
                pause = retry.after(e, call.route, self._settings.nodes.current)
            await calls.sleep_async(pause)

    def _node_client(self, node: str) -> httpx.AsyncClient:
        http = self._https.get(node)
        if http is None:
            with self._lock:
                http = self._https.get(node)
                if http is None:
                    http = self._https[node] = self._http_client(node)
        return http

    def collection(self, name: str) -> AsyncCollection:
        """A query on the collection ``name`` (an identifier)."""
        return AsyncCollection(name, self)

    @overload
    def from_(self, name: str) -> AsyncCollection: ...

    @overload
    def from_(self, name: str, kind: Type[R]) -> AsyncTypedCollection[R]: ...

    def from_(self, name: str, kind: Optional[Type[R]] = None) -> Union[AsyncCollection, AsyncTypedCollection[R]]:
        """A query on the collection ``name``; as :meth:`collection`. With
        ``kind`` — a TypedDict, a dataclass or a pydantic model — its reads
        answer rows of that type (:class:`AsyncTypedCollection`)."""
        if kind is None:
            return AsyncCollection(name, self)
        return AsyncTypedCollection(name, self, _kind=check_kind(kind))

    def consumer(self, name: str, collection: Optional[str] = None) -> AsyncConsumer:
        """The change stream's consumer called ``name`` (docs/changes.md,
        "The change stream"), on ``collection`` or, without one, on every
        collection: the committed writes in commit order, read in batches
        and acknowledged, so each is handled at least once."""
        return AsyncConsumer(self, name, collection)

    async def query(
        self,
        statement: StatementLike,
        params: Sequence[Any] = (),
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Answer:
        """Run one FenecQL statement with its ``$1…$n`` ``params``; answers its
        :class:`Rows`, or a write's :class:`Affected` count. ``wait`` (seconds,
        0 to 30) holds a claim at the server while it would take nothing.
        ``after`` (a :attr:`Result.seq`, perhaps another client's or node's)
        runs it once the server has applied that write, sent as
        ``Fenec-After`` (docs/cluster.md, "Reads")."""
        body, collection = calls.query_body(statement, params)
        retry = calls.Retry(self._config, [body["query"]], idempotency_key)
        call = self._settings.call(api.QUERY, wait=wait, idempotency_key=retry.key, timeout=timeout, after=after)
        if calls.to_load(self._settings, [collection]):
            await self.collections(timeout=timeout)
            calls.loaded(self._settings, [collection])
        call, reply, got = await self._asked(
            call, retry, lambda http, c, t: api.query_async(http, body, c.headers, token=self._settings.token, timeout=t)
        )
        await self._reload([body["query"]], [collection], [got], timeout)
        return calls.answer(self._settings, collection, got, call, reply)

    async def batch(
        self,
        statements: Sequence[StatementLike],
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Results:
        """Run statements all or nothing, under one lock; answers each one's
        answer. A refusal's :class:`FenecError` names the statement in ``at``."""
        bodies, collections = zip(*[calls.query_body(s) for s in statements]) if statements else ((), ())
        retry = calls.Retry(self._config, [b["query"] for b in bodies], idempotency_key)
        call = self._settings.call(api.BATCH, wait=wait, idempotency_key=retry.key, timeout=timeout, after=after)
        if calls.to_load(self._settings, collections):
            await self.collections(timeout=timeout)
            calls.loaded(self._settings, collections)
        batch: api.BatchRequest = {"statements": list(bodies)}
        call, reply, got = await self._asked(
            call, retry, lambda http, c, t: api.batch_async(http, batch, c.headers, token=self._settings.token, timeout=t)
        )
        results = got.get("results") if isinstance(got, dict) else None
        if isinstance(results, list):
            await self._reload([b["query"] for b in bodies], collections, results, timeout)
        return calls.batch_results(self._settings, collections, got, call, reply)

    async def health(self, *, timeout: Optional[float] = DEFAULT) -> api.Health:
        """The server's health document: ``{"ok": True, "store": "ok"}`` while
        its store takes writes; ``{"ok": False, "store": "failed", "error":
        …}`` (a 503) while it does not — an answer, not an error: the
        server is up and serves reads (docs/reliability.md)."""
        call = self._settings.call(api.HEALTH, timeout=timeout)
        call, reply = await self._send(call, lambda http, t: api.health_async(http, timeout=t))
        return calls.health_of(call, reply)

    async def collections(self, *, timeout: Optional[float] = DEFAULT) -> List[api.Collection]:
        """Every collection, with its fields, their types and indexes."""
        call = self._settings.call(api.COLLECTIONS, timeout=timeout)
        call, reply = await self._send(
            call, lambda http, t: api.collections_async(http, token=self._settings.token, timeout=t)
        )
        got: List[api.Collection] = calls.answered(call, reply)["collections"]
        calls.learn(self._settings, got)
        return got

    async def _reload(
        self, queries: Sequence[str], collections: Sequence[Optional[str]], answers: Sequence[Any], timeout: Optional[float]
    ) -> None:
        """Loads the field types again when rows hold a column not seen yet,
        so they decode by type. The answer is in hand: a failure to load
        leaves its rows as the JSON says rather than losing them."""
        if calls.to_reload(self._settings, queries, collections, answers):
            try:
                await self.collections(timeout=timeout)
            except FenecError:
                return
            calls.learnt(self._settings, collections, answers)

    async def aclose(self) -> None:
        """Close the connections."""
        for http in list(self._https.values()):
            await http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.aclose()


CHANGES = api.Route("GET", "/_changes")
CHANGES_ACK = api.Route("POST", "/_changes/ack")
BATCHES_WAIT = 5.0
"""Seconds :meth:`AsyncConsumer.batches` holds each read by default."""


class AsyncConsumer:
    """A named consumer of the change stream (:meth:`AsyncClient.consumer`),
    sent through its client: its token, TLS, proxy, headers and nodes."""

    def __init__(self, db: AsyncClient, name: str, collection: Optional[str] = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a consumer's name is non-empty text, got {name!r}")
        self._db = db
        self.name = name
        self.collection = collection

    async def read(
        self, *, limit: Optional[int] = None, wait: Optional[float] = None, timeout: Optional[float] = DEFAULT
    ) -> api.Changes:
        """Returns the changes after the consumer's acknowledged position:
        at most ``limit`` (1 to 1000; the server's default 100), the read
        held up to ``wait`` seconds (0 to 30) while there are none. A read
        moves nothing: read again without :meth:`ack`, the same changes
        come back. Raises :class:`ConsumerBusy` (409) while another read
        under the name runs, and :class:`ChangesGone` (410) when the
        position is older than the oldest change the server keeps."""
        query: Dict[str, str] = {"consumer": self.name}
        if self.collection is not None:
            query["collection"] = self.collection
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
                raise ValueError(f"limit is a whole number from 1 to 1000, got {limit!r}")
            query["limit"] = str(limit)
        ms = calls.check_wait(wait)
        if ms is not None:
            query["wait"] = str(ms)
        route = api.Route(CHANGES.method, CHANGES.path + "?" + urlencode(query))
        got: api.Changes = await self._call(route, None, float(wait or 0), timeout)
        return got

    async def ack(self, position: int, *, timeout: Optional[float] = DEFAULT) -> None:
        """Moves the consumer's position to ``position`` (a batch's
        ``next``): durable once this returns."""
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ValueError(f"position is a whole number from 0, got {position!r}")
        body: api.ChangesAck = {"consumer": self.name, "position": position}
        await self._call(CHANGES_ACK, body, 0.0, timeout)

    async def batches(
        self, *, limit: Optional[int] = None, wait: float = BATCHES_WAIT, timeout: Optional[float] = DEFAULT
    ) -> AsyncIterator[api.Changes]:
        """Reads batch after batch, each held up to ``wait`` seconds while
        there is none, and yields those with changes. A batch is
        acknowledged when the next one is asked for, so a loop that raises
        or stops early, or a process that dies, reads it again."""
        while True:
            batch = await self.read(limit=limit, wait=wait, timeout=timeout)
            if not batch["changes"]:
                continue
            yield batch
            await self.ack(batch["next"], timeout=timeout)

    async def _call(self, route: api.Route, body: Any, wait: float, timeout: Optional[float]) -> Any:
        db = self._db
        call = dataclasses.replace(db._settings.call(route, timeout=timeout), wait=wait)
        token = db._settings.token

        async def send(http: httpx.AsyncClient, t: httpx.Timeout) -> api.Reply[Any]:
            request = api._request(http, route, body, {}, token, t)
            return api._reply(await http.send(request), text=False)

        call, reply = await db._send(call, send)
        return calls.answered(call, reply)


class AsyncCollection(Query[AsyncClient]):
    """A query on one collection: immutable, each method answers a new one.
    Its endpoints send the statement it renders; each takes ``timeout=``
    (seconds) and ``after=`` (a :attr:`Result.seq`, as :meth:`AsyncClient.query`)
    for that call."""

    async def rows(self, *, timeout: Optional[float] = DEFAULT, after: Optional[int] = None) -> Rows:
        """The rows: ``get c [select …] [where …] [order …] [limit n] [offset n]``."""
        return calls.rows_of(await self.db.query(self.render_rows(), timeout=timeout, after=after))

    async def first(self, *, timeout: Optional[float] = DEFAULT, after: Optional[int] = None) -> Optional[Row]:
        """The first row, or ``None``."""
        rows = calls.rows_of(await self.db.query(self.render_first(), timeout=timeout, after=after))
        return rows[0] if rows else None

    async def count(self, *, timeout: Optional[float] = DEFAULT, after: Optional[int] = None) -> int:
        """How many rows match."""
        return calls.count_of(await self.db.query(self.render_count(), timeout=timeout, after=after))

    async def insert(
        self,
        docs: Union[Doc, Sequence[Doc]],
        *,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Affected:
        """Insert a document or a list of them; answers how many. A taken id
        or ``@unique`` value raises :class:`Conflict` and writes nothing —
        unless the query says :meth:`if_absent` (then it counts 0) or
        :meth:`upsert`."""
        stmt = self.render_insert(docs)
        return calls.affected_of(await self.db.query(stmt, idempotency_key=idempotency_key, timeout=timeout, after=after))

    @overload
    async def update(
        self,
        patch: Doc,
        *,
        returning: Literal[False] = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Affected: ...

    @overload
    async def update(
        self,
        patch: Doc,
        *,
        returning: Union[Literal[True], Sequence[str]],
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Rows: ...

    async def update(
        self,
        patch: Doc,
        *,
        returning: Returning = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Answer:
        """Write ``patch`` into the matching rows (``set``): values, ``None``,
        ``expr(...)`` or ``inc(n)``. Answers the count, or with ``returning``
        the rows as written. ``require=n`` raises :class:`Unmet` unless exactly
        n rows; ``wait`` (seconds, 0 to 30) holds the claim at the server
        while it would take nothing."""
        stmt = self.render_update(patch, returning=returning, require=require)
        return await self.db.query(stmt, wait=wait, idempotency_key=idempotency_key, timeout=timeout, after=after)

    @overload
    async def delete(
        self,
        *,
        returning: Literal[False] = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Affected: ...

    @overload
    async def delete(
        self,
        *,
        returning: Union[Literal[True], Sequence[str]],
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Rows: ...

    async def delete(
        self,
        *,
        returning: Returning = False,
        require: Optional[int] = None,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Answer:
        """Delete the matching rows (``del``); options as :meth:`update`."""
        stmt = self.render_delete(returning=returning, require=require)
        return await self.db.query(stmt, wait=wait, idempotency_key=idempotency_key, timeout=timeout, after=after)


class AsyncTypedCollection(Query[AsyncClient], Generic[R]):
    """A query on one collection whose rows are read as ``R`` — a
    TypedDict, a dataclass (made from the columns it has fields for) or a
    pydantic model (validated): ``db.from_("jobs", Job)``. Immutable, as
    :class:`AsyncCollection`; :meth:`untyped` is the same query answering
    dicts, for ``update`` and ``delete``."""

    async def rows(self, *, timeout: Optional[float] = DEFAULT, after: Optional[int] = None) -> List[R]:
        """The rows, each an ``R``."""
        rows = calls.rows_of(await self.db.query(self.render_rows(), timeout=timeout, after=after))
        return [row_as(self._kind, r) for r in rows]

    async def first(self, *, timeout: Optional[float] = DEFAULT, after: Optional[int] = None) -> Optional[R]:
        """The first row as an ``R``, or ``None``."""
        rows = calls.rows_of(await self.db.query(self.render_first(), timeout=timeout, after=after))
        return row_as(self._kind, rows[0]) if rows else None

    async def count(self, *, timeout: Optional[float] = DEFAULT, after: Optional[int] = None) -> int:
        """How many rows match."""
        return calls.count_of(await self.db.query(self.render_count(), timeout=timeout, after=after))

    async def insert(
        self,
        docs: Any,
        *,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Affected:
        """Insert a document or a list of them — mappings, dataclass
        instances (their fields: ``R`` or another dataclass, such as one
        without ``id``) or pydantic models (their dump); answers how many."""
        given = [doc_of(d) for d in docs] if isinstance(docs, (list, tuple)) else doc_of(docs)
        stmt = self.render_insert(given)
        return calls.affected_of(await self.db.query(stmt, idempotency_key=idempotency_key, timeout=timeout, after=after))

    def untyped(self) -> AsyncCollection:
        """The same query, answering dicts, with every endpoint of
        :class:`AsyncCollection`."""
        return AsyncCollection(
            self.name, self.db, self._where, self._order, self._limit, self._offset, self._select, self._near, self._absent
        )
