"""What the blocking and the asyncio client share: checking a call's
settings, building its headers, body and timeout, and turning its answer —
or httpx's exception — into a result or a :class:`FenecError`. The clients
only send (``_async/client.py``, and ``_sync/client.py`` generated from it)."""

from __future__ import annotations

import asyncio
import functools
import math
import os
import platform
import random
import ssl
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Dict, List, Mapping, NoReturn, Optional, Sequence, Set, Tuple, Union, cast
from urllib.parse import urlsplit

import httpx

from . import _generated as api
from ._builder import Statement
from ._codec import Affected, Answer, Results, Rows, Types, check_finite, decode_rows, missing, to_json
from ._errors import FenecError, NetworkError, Timeout, UnexpectedAnswer

DEFAULT_TIMEOUT = 30.0
"""Seconds a call may take, unless the client or the call says otherwise."""

MAX_WAIT = 30.0
"""The longest ``wait=`` the server holds a claim, in seconds."""

StatementLike = Union[Statement, str]

Verify = Union[bool, str, ssl.SSLContext]
"""How an https server's certificate is checked (``connect``'s ``verify``)."""


def ssl_context(verify: Verify) -> Union[bool, ssl.SSLContext]:
    """The TLS context httpx is given for ``verify``: the system's trusted
    CAs for ``True`` (httpx's own default is certifi's bundle, which knows
    no CA an organisation installed), a PEM file's CAs for a path; a context
    or ``False`` as is."""
    if verify is True:
        return ssl.create_default_context()
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return verify


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()
"""A call's ``timeout=`` left to the client's."""


def check_url(url: str) -> str:
    """``url`` when it is ``http(s)://host[:port][/path]``; else a ValueError now,
    not at the first call."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the server URL {url!r} is not http(s)://host[:port]")
    try:
        parts.port
    except ValueError as e:
        raise ValueError(f"the server URL {url!r} has a bad port: {e}") from None
    return url


def check_urls(url: Union[str, Sequence[str]]) -> List[str]:
    """The URLs ``connect`` was given — one, a comma-separated string of a
    cluster's nodes, or a sequence of them — each checked now (a bad one
    named by its place), duplicates dropped."""
    if isinstance(url, str):
        given = [u.strip() for u in url.split(",")] if "," in url else [url]
    elif isinstance(url, Sequence):
        given = list(url)
    else:
        raise ValueError(f"the server URL {url!r} is not http(s)://host[:port]")
    if not given:
        raise ValueError("connect needs a server URL: http(s)://host[:port]")
    if len(given) == 1:
        return [check_url(given[0])]
    out: List[str] = []
    seen: Set[str] = set()
    for i, u in enumerate(given):
        try:
            check_url(u)
        except ValueError as e:
            raise ValueError(f"node {i + 1} of {len(given)}: {e}") from None
        key = u.rstrip("/")
        if key not in seen:
            seen.add(key)
            out.append(u)
    return out


@functools.lru_cache(maxsize=64)
def host_of(url: str) -> str:
    """``host:port`` of a URL, for messages (kept: every call names its node's)."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def check_timeout(timeout: Optional[float], what: str = "timeout") -> Optional[float]:
    """Seconds, > 0, or ``None`` (no limit)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"{what} is a number of seconds above 0 (or None: no limit), got {timeout!r}")
    return float(timeout)


def check_after(after: Optional[int]) -> Optional[int]:
    """``after``, a :attr:`Result.seq`: a whole number from 0 to 2**53 - 1."""
    if after is None:
        return None
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= 2**53 - 1:
        raise ValueError(f"after is a whole number from 0 to 2**53 - 1 (a Result.seq), got {after!r}")
    return after


def check_wait(wait: Optional[float]) -> Optional[int]:
    """``wait`` (seconds, 0 to 30) as Fenec-Wait's milliseconds."""
    if wait is None:
        return None
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not (0 <= wait <= MAX_WAIT):
        raise ValueError(f"wait is a number of seconds from 0 to {MAX_WAIT:g}, got {wait!r}")
    return round(wait * 1000)


@dataclass(frozen=True)
class Call:
    """One request's settings, checked: what it sends and how long it may take."""

    route: api.Route
    host: str
    headers: api.QueryHeaders
    timeout: Optional[float]
    wait: float
    timeout_is_client: bool

    @property
    def httpx_timeout(self) -> httpx.Timeout:
        """The timeout; a held claim's answer is awaited as much longer as
        it may be held (timeout + wait)."""
        if self.timeout is None:
            return httpx.Timeout(None)
        return httpx.Timeout(self.timeout, read=self.timeout + self.wait)

    def fail(self, e: httpx.HTTPError) -> NoReturn:
        """httpx's exception as a FenecError, httpx's as its cause."""
        if isinstance(e, httpx.TimeoutException):
            whose = "the client's timeout" if self.timeout_is_client else "the call's timeout="
            if self.wait and isinstance(e, httpx.ReadTimeout) and self.timeout is not None:
                limit = f"{self.timeout + self.wait:g} s ({whose} of {self.timeout:g} s plus the wait of {self.wait:g} s)"
            else:
                limit = f"{self.timeout:g} s ({whose})"
            phase = "" if isinstance(e, httpx.ReadTimeout) else f", {_PHASES.get(type(e), 'waiting')}"
            raise Timeout(f"no answer from {self.host} in {limit}{phase}", code="timeout") from e
        if isinstance(e, httpx.TransportError):
            raise NetworkError(f"cannot reach {self.host}: {_reason(e)} ({self.route.method} {self.route.path})", code="network") from e
        raise UnexpectedAnswer(f"unexpected answer from {self.host}: {type(e).__name__}: {e}", code="unexpected") from e


_PHASES = {
    httpx.ConnectTimeout: "connecting",
    httpx.WriteTimeout: "sending",
    httpx.PoolTimeout: "waiting for a free connection",
}


def _reason(e: BaseException) -> str:
    """The cause in words: ``connection refused`` rather than
    ``[Errno 111] Connection refused`` or anyio's "All connection attempts
    failed" (whose cause is the refusal)."""
    seen = set()
    todo = [e]
    while todo:
        inner = todo.pop(0)
        if id(inner) in seen:
            continue
        seen.add(id(inner))
        if isinstance(inner, ssl.SSLCertVerificationError):
            # Its errno (1) would read "operation not permitted".
            return f"TLS: the server's certificate failed the check: {inner.verify_message}"
        if isinstance(inner, ssl.SSLError):
            return f"TLS: {inner.reason or inner}"
        if isinstance(inner, OSError) and (inner.errno or inner.strerror):
            # asyncio's strerror is "Connect call failed (…)": the errno says why.
            text = os.strerror(inner.errno) if inner.errno else str(inner.strerror)
            return text[:1].lower() + text[1:]
        todo += [x for x in (inner.__cause__, inner.__context__) if x is not None]
        todo += list(getattr(inner, "exceptions", ()))
    text = str(e) or type(e).__name__
    text = text.split("] ", 1)[-1] if text.startswith("[Errno") else text
    return text[:1].lower() + text[1:]


HEADER_FENEC_LEADER = "Fenec-Leader"
"""The header of a cluster follower's 403 that names the leader's URL
(docs/cluster.md, "Writes")."""

MAX_FOLLOWS = 3
"""How many times one call follows a named leader before it raises the 403."""

FIRST_PAUSE, LAST_PAUSE = 0.05, 1.0
"""The pause between full rounds of the nodes: 50 ms, doubling to 1 s."""


class Nodes:
    """A client's nodes: the configured URLs and the one it sends to now —
    the first given, or the leader it was last sent to (docs/sdks.md,
    "Several nodes") — and the highest ``Fenec-Seq`` any of them answered,
    sent as ``Fenec-After`` on every query and batch, so that a node the
    client moves to (a follower, after a failover) answers only once it
    has applied the client's writes (read-your-writes, docs/cluster.md)."""

    def __init__(self, urls: List[str]) -> None:
        self.urls = urls
        self.current = urls[0]
        self.seq = 0

    def saw(self, seq: int) -> None:
        """Remembers a ``Fenec-Seq`` answered; only ever upwards. Threads
        may race here: a lower one written last is raised by the next."""
        if seq > self.seq:
            self.seq = seq

    @property
    def several(self) -> bool:
        return len(self.urls) > 1


VERSION = "0.1.0"
"""This package's version, as its User-Agent names it; a test keeps it
equal to pyproject.toml's."""

USER_AGENT = f"fenecdb-python/{VERSION} python/{platform.python_version()}"
"""Sent on every request (docs/sdks.md)."""


@dataclass(frozen=True)
class Config:
    """How a client's connections are made (``connect``'s ``verify``,
    ``proxy``, ``headers``, ``max_retries``), checked."""

    ssl: Union[bool, ssl.SSLContext]
    proxy: Optional[str]
    headers: Dict[str, str]
    max_retries: int

    @staticmethod
    def make(verify: Verify, proxy: Optional[str], headers: Optional[Mapping[str, str]], max_retries: int) -> "Config":
        if proxy is not None and (not isinstance(proxy, str) or urlsplit(proxy).scheme not in ("http", "https", "socks5")):
            raise ValueError(f"proxy is a URL (http://host:port), got {proxy!r}")
        sent = {"User-Agent": USER_AGENT}
        for name, value in (headers or {}).items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError(f"headers maps text to text, got {name!r}: {value!r}")
            sent[name] = value
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries is a whole number from 0, got {max_retries!r}")
        return Config(ssl_context(verify), proxy, sent, max_retries)


class Settings:
    """A client's fixed settings and the statement types it has learnt.
    No ``url`` reads ``FENEC_URL``, and then ``FENEC_TOKEN`` for a token not
    given."""

    def __init__(self, url: Union[str, Sequence[str], None], token: Optional[str], timeout: Optional[float]) -> None:
        if url is None:
            url = os.environ.get("FENEC_URL", "")
            if not url:
                raise ValueError("no server URL given, and FENEC_URL is not set")
            if token is None:
                token = os.environ.get("FENEC_TOKEN") or None
        self.nodes = Nodes(check_urls(url))
        self.token = token
        self.timeout = check_timeout(timeout)
        self.types: Types = {}
        self.not_fields: Dict[str, Set[str]] = {}

    def call(
        self,
        route: api.Route,
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = DEFAULT,
        after: Optional[int] = None,
    ) -> Call:
        headers: api.QueryHeaders = {}
        ms = check_wait(wait)
        if ms is not None:
            headers["fenec_wait"] = ms
        if idempotency_key is not None:
            if not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key.encode()) <= 255:
                raise ValueError(f"idempotency_key is 1 to 255 bytes of text, got {idempotency_key!r}")
            headers["idempotency_key"] = idempotency_key
        seq = check_after(after)
        if self.nodes.several and self.nodes.seq > 0:
            # One URL is one server (a lone one answers 400 for a Fenec-After
            # beyond its own writes): only several nodes need it.
            seq = max(seq or 0, self.nodes.seq)
        if seq is not None:
            headers["fenec_after"] = seq
        is_client = timeout is DEFAULT
        seconds = self.timeout if is_client else check_timeout(timeout)
        return Call(route, host_of(self.nodes.current), headers, seconds, float(wait or 0), is_client)


class Walk:
    """One call's way to a node that runs it (docs/sdks.md, "Several
    nodes"): it follows the leader a 403 names (at most 3 times between
    pauses, never from https to http), sends a 503 ``no_leader`` again
    after a pause (to the next URL given several, else to the same node),
    and — given several URLs — moves to the next one, round robin with a
    pause after each full round, while the node sent to cannot have run the
    request. Everything else is the caller's, as with one URL."""

    def __init__(self, settings: Settings, call: Call) -> None:
        self.nodes = settings.nodes
        self.node = self.nodes.current
        self.first = call
        self.call = call
        self.follows = 0
        self.misses = 0
        self.pause = FIRST_PAUSE
        self.refused: Set[str] = set()
        self.at = self.nodes.urls.index(self.node) + 1 if self.node in self.nodes.urls else 0
        budget = None if call.timeout is None else call.timeout + call.wait
        self.deadline = None if budget is None else time.monotonic() + budget
        self.tries = 0

    def timeout(self) -> httpx.Timeout:
        """The next request's timeout: the call's for the first, what is
        left of its deadline for the others."""
        self.tries += 1
        if self.tries == 1 or self.deadline is None or self.first.timeout is None:
            return self.first.httpx_timeout
        left = max(self.deadline - time.monotonic(), 0.001)
        return httpx.Timeout(min(self.first.timeout, left), read=left)

    def failed(self, e: httpx.HTTPError) -> float:
        """After httpx's exception: the pause before the next node, or the
        FenecError raised. Only a connection that could not be made (nothing
        sent) moves on, and only with several URLs."""
        if not (self.nodes.several and isinstance(e, httpx.ConnectError)):
            self.call.fail(e)
        self.refused.add(self.node)
        try:
            self.call.fail(e)
        except FenecError as err:
            return self._next(err)

    def answered(self, reply: api.Reply[Any]) -> Optional[float]:
        """After an answer: ``None`` when it is the call's (the node
        answered: it is the current node now), else the pause before the
        request is sent again, to :attr:`node`."""
        if reply.ok:
            self.nodes.current = self.node
            self.nodes.saw(seq_of(reply))
            return None
        body = reply.body if isinstance(reply.body, dict) else {}
        code = body.get("code")
        leader = reply.headers.get(HEADER_FENEC_LEADER) if reply.status == 403 and code == "forbidden" else None
        if leader and leader not in self.refused:
            to = _followable(self.node, leader)
            if to is None or self.follows == MAX_FOLLOWS:
                return self._final()
            self.follows += 1
            self.node = self.nodes.current = to
            self.call = replace(self.first, host=host_of(to))
            return 0.0
        if reply.status == 503 and code == "no_leader":
            # Refused unrun: no leader known now (an election), or a leader
            # just elected that applies the earlier terms' writes first
            # (docs/cluster.md). Again after the pause: to the next node,
            # or to the same one when it is the only.
            pause = self._wait(reply)
            if self.nodes.several:
                self._step()
            return pause
        if self.nodes.several and leader:
            # A leader named whose connection was refused in this call (a
            # follower that has not yet seen it die): another node may know.
            # A 403 of a token's rules names none, and is raised at once.
            try:
                answered(self.call, reply)
            except FenecError as err:
                return self._next(err)
        return self._final()

    def _final(self) -> Optional[float]:
        """The answer is the call's: the node that gave it is the current one."""
        self.nodes.current = self.node
        return None

    def _wait(self, reply: api.Reply[Any]) -> float:
        try:
            answered(self.call, reply)
        except FenecError as err:
            return self._due(err)
        raise AssertionError("an error answer answered")  # pragma: no cover

    def _next(self, last: FenecError) -> float:
        """Moves to the next configured URL; the pause due first."""
        self.misses += 1
        pause = self._due(last) if self.misses % len(self.nodes.urls) == 0 else 0.0
        self._step()
        return pause

    def _step(self) -> None:
        """Moves to the next configured URL, round robin."""
        self.node = self.nodes.urls[self.at % len(self.nodes.urls)]
        self.at += 1
        self.call = replace(self.first, host=host_of(self.node))

    def _due(self, last: FenecError) -> float:
        """The pause due now (50 ms doubling to 1 s); ``last`` is raised
        when the call's deadline comes before its end."""
        pause, self.pause = self.pause, min(self.pause * 2, LAST_PAUSE)
        if self.deadline is not None and time.monotonic() + pause >= self.deadline:
            raise last
        # The follows count since the last pause: a cluster in mid-election
        # (a follower names a leader that answers no_leader) is not given up
        # while the deadline allows.
        self.follows = 0
        return pause


READS = frozenset({"get", "explain"})
"""The first words of the statements that write nothing."""


def writes(query: str) -> bool:
    """Whether a statement may write: any but a ``get`` or an ``explain``."""
    words = query.split(None, 1)
    return not words or words[0].lower() not in READS


class Retry:
    """One call's retries (``max_retries``): after a fault — a network
    error, a timeout, ``unavailable``, ``internal`` — the call is sent
    again, after a random delay from 0 to 0.5 s × 2^(n − 1) (capped at 8 s:
    full jitter), at most ``max_retries`` times. A write is retried only
    under an idempotency key, so that one the server applied before the
    answer was lost is answered again rather than applied twice
    (docs/http.md, "Idempotency-Key"): with retries on, a write the call
    gave no key gets one generated."""

    def __init__(self, config: Config, queries: Sequence[str], key: Optional[str]) -> None:
        self.max = config.max_retries
        self.write = any(writes(q) for q in queries)
        self.key = key if key is not None or not (self.max and self.write) else uuid.uuid4().hex
        self.queries = queries
        self.tries = 0

    def after(self, error: FenecError, route: api.Route, node: str) -> float:
        """The pause before the call is sent again; else ``error`` raised,
        naming what was asked."""
        error.method, error.node = route.method, node
        error.statement = self.queries[0][:200] if self.queries else None
        error.idempotency_key = self.key
        self.tries += 1
        if self.tries > self.max or not error.retryable or (self.write and self.key is None):
            raise error
        return random.uniform(0, min(8.0, 0.5 * 2 ** (self.tries - 1)))


def _followable(node: str, leader: str) -> Optional[str]:
    """The leader's URL to send to, or ``None`` when it is not an
    http(s) URL, or would take an https client to http (the token in clear)."""
    parts = urlsplit(leader)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if urlsplit(node).scheme == "https" and parts.scheme == "http":
        return None
    return leader


Send = Callable[[httpx.Client, httpx.Timeout], "api.Reply[Any]"]
"""Sends one request to the node a client is given (the blocking client's)."""

SendAsync = Callable[[httpx.AsyncClient, httpx.Timeout], Awaitable["api.Reply[Any]"]]
"""Sends one request to the node a client is given (the asyncio client's)."""


Ask = Callable[[httpx.Client, Call, httpx.Timeout], "api.Reply[Any]"]
"""Sends one query or batch as a call says (the blocking client's)."""

AskAsync = Callable[[httpx.AsyncClient, Call, httpx.Timeout], Awaitable["api.Reply[Any]"]]
"""Sends one query or batch as a call says (the asyncio client's)."""


def sleep(seconds: float) -> None:
    if seconds > 0:
        time.sleep(seconds)


async def sleep_async(seconds: float) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)


def query_body(statement: StatementLike, params: Sequence[Any] = ()) -> Tuple[api.QueryRequest, Optional[str]]:
    """A ``/query`` body (or one statement of a ``/batch``), and the
    collection a builder rendered it for."""
    if isinstance(statement, Statement):
        if params:
            raise TypeError("a Statement carries its own params")
        text, values, collection = statement.query, list(statement.params), statement.collection
    elif isinstance(statement, str):
        text, values, collection = statement, list(params), None
    else:
        raise TypeError(f"a statement is FenecQL text or a Statement, got {statement!r}")
    check_finite(values, "params")
    return {"query": text, "params": to_json(values)}, collection


def answered(call: Call, reply: api.Reply[Any]) -> Any:
    """The body of a 2xx; else the error for it: the server's (a class per
    code) when the body is the API's error JSON, else ``unexpected``."""
    body = reply.body
    if reply.ok and body is not None:
        return body
    if isinstance(body, dict) and isinstance(body.get("error"), str) and body.get("code") in api.ERRORS:
        at = body.get("at")
        cls = api.ERRORS[body["code"]]
        leader = reply.headers.get(HEADER_FENEC_LEADER) if body["code"] == "forbidden" else None
        raise cls(
            body["error"],
            status=reply.status,
            code=body["code"],
            at=at if isinstance(at, int) and not isinstance(at, bool) else None,
            leader=leader or None,
        )
    raise unexpected(call, reply)


def health_of(call: Call, reply: api.Reply[Any]) -> api.Health:
    """``GET /_health``'s document, the 503 of a failed store's included
    (openapi.yaml answers it with the same schema); any other failure is
    raised as every call's."""
    body = reply.body
    if reply.status in (200, 503) and isinstance(body, dict) and isinstance(body.get("ok"), bool) and isinstance(body.get("store"), str):
        return cast(api.Health, body)
    answered(call, reply)
    raise unexpected(call, reply)


def unexpected(call: Call, reply: api.Reply[Any]) -> UnexpectedAnswer:
    """An answer that is not the API's JSON: its status and the first 200
    characters of its body."""
    start = " ".join(reply.text.split())[:200]
    return UnexpectedAnswer(
        f"unexpected answer from {call.host}: HTTP {reply.status}: {start or '(an empty body)'}",
        status=reply.status,
        code="unexpected",
    )


def seq_of(reply: api.Reply[Any]) -> int:
    text = reply.headers.get(api.HEADER_FENEC_SEQ, "")
    return int(text) if text.isdigit() else 0


def replayed_of(reply: api.Reply[Any]) -> bool:
    return bool(reply.headers.get(api.HEADER_IDEMPOTENT_REPLAYED, "").lower() == "true")


def to_load(settings: Settings, collections: Sequence[Optional[str]]) -> bool:
    """Whether to load the field types before sending: a statement of a
    collection not loaded yet (loaded first, so a failure to load them never
    loses an answer, such as a claim's jobs)."""
    return any(c is not None and c not in settings.types for c in collections)


def loaded(settings: Settings, collections: Sequence[Optional[str]]) -> None:
    """After the load before sending: a collection ``/collections`` did not
    list (not made yet, or one the token may not read) has no types to
    decode by, and is not asked about again before each statement."""
    for c in collections:
        if c is not None:
            settings.types.setdefault(c, {})


def to_reload(settings: Settings, queries: Sequence[str], collections: Sequence[Optional[str]], answers: Sequence[Any]) -> bool:
    """Whether to load the field types again after an answer: a statement
    changed the schema, or rows hold a column not seen yet."""
    if any(_changes_schema(q) for q in queries):
        settings.types.clear()
        settings.not_fields.clear()
        return False
    return any(missing(settings.types, c, a) - settings.not_fields.get(c or "", set()) for c, a in zip(collections, answers))


def _changes_schema(query: str) -> bool:
    word = query.lstrip().split(None, 1)[:1]
    return bool(word) and word[0].lower() in ("create", "drop", "alter")


def learn(settings: Settings, collections: List[api.Collection]) -> None:
    settings.types = {c["name"]: {f["name"]: f["type"] for f in c["fields"]} for c in collections}


def learnt(settings: Settings, collections: Sequence[Optional[str]], answers: Sequence[Any]) -> None:
    """After a load: collections it did not list are known to have no
    fields yet, and columns still unknown (``count``, ``payload.to``) are
    no fields — neither is asked about again."""
    for c, a in zip(collections, answers):
        if c is not None:
            settings.types.setdefault(c, {})
            settings.not_fields.setdefault(c, set()).update(missing(settings.types, c, a))


def answer(
    settings: Settings,
    collection: Optional[str],
    body: Any,
    call: Call,
    reply: api.Reply[Any],
    marks: Optional[Tuple[int, bool]] = None,
) -> Answer:
    """One statement's answer, decoded: its rows or its count, with the
    reply's ``Fenec-Seq`` and ``Idempotent-Replayed`` (``marks``: read
    once for a batch's answers — each header look-up scans them all)."""
    seq, replayed = marks if marks is not None else (seq_of(reply), replayed_of(reply))
    if isinstance(body, list) and all(isinstance(r, dict) for r in body):
        rows = Rows(decode_rows(settings.types, collection, body))
        rows.seq, rows.replayed = seq, replayed
        return rows
    if isinstance(body, dict) and isinstance(body.get("affected"), int):
        n = Affected(body["affected"])
        n.seq, n.replayed = seq, replayed
        return n
    raise unexpected(call, reply)


def batch_results(
    settings: Settings, collections: Sequence[Optional[str]], body: Any, call: Call, reply: api.Reply[Any]
) -> Results:
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list) or len(results) != len(collections):
        raise unexpected(call, reply)
    marks = (seq_of(reply), replayed_of(reply))
    out = Results(answer(settings, c, r, call, reply, marks) for c, r in zip(collections, results))
    out.seq, out.replayed = marks
    return out
def rows_of(a: Answer) -> Rows:
    if not isinstance(a, Rows):
        raise UnexpectedAnswer("expected rows, got a count", code="unexpected")
    return a


def affected_of(a: Answer) -> Affected:
    if not isinstance(a, Affected):
        raise UnexpectedAnswer("expected a count, got rows", code="unexpected")
    return a


def count_of(a: Answer) -> int:
    rows = rows_of(a)
    if not rows or not isinstance(rows[0].get("count"), int):
        raise UnexpectedAnswer(f"expected a count row, got {rows!r}", code="unexpected")
    return int(rows[0]["count"])
