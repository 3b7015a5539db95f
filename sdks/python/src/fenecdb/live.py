"""Live queries (docs/changes.md): a ``get`` kept up to date over
Server-Sent Events, as an async generator that reconnects where it left
off.

    async for event in fenecdb.live.watch("http://127.0.0.1:8080", "get msgs where room = $1", ["lobby"]):
        if event.name == "insert": ...

Each event is one the server sent: ``rows``/``reset`` (``data["rows"]``),
``insert``/``update`` (``data["row"]``), ``delete`` (``data["id"]``),
``gap`` and ``closing``. A dropped connection, a ``closing`` the server
sent (shutting down, or the client fell behind), or an answer that may
succeed later (:attr:`FenecError.retryable`: a server shutting down
answers 503 ``unavailable``) is followed by a reconnect with
``Last-Event-ID``, so no change is missed: the server sends nothing again,
or a ``reset`` with the rows as they are now.

:func:`watch_sync` is the same as a plain iterator, for threaded code:

    for event in fenecdb.live.watch_sync(url, "get msgs where room = $1", ["lobby"]):
        ..."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, Generator, List, Optional, Sequence

import httpx

from ._errors import FenecError, NetworkError
from ._generated import ERRORS


@dataclass(frozen=True)
class LiveEvent:
    """One event of a live query: its name, the commit position it carries
    (the SSE ``id:``), and its data."""

    name: str
    position: int
    data: Dict[str, Any] = field(default_factory=dict)


async def watch(
    url: str,
    query: str,
    params: Optional[Sequence[Any]] = None,
    *,
    token: Optional[str] = None,
    last_event_id: Optional[int] = None,
    retries: int = 10,
    retry_delay: float = 0.5,
    http: Optional[httpx.AsyncClient] = None,
) -> AsyncIterator[LiveEvent]:
    """Run ``query`` (one ``get`` with ``where`` and ``select`` only) as a
    live query at the server ``url``, yielding its events until the caller
    stops iterating. An answer that may succeed later (``retryable``: a
    503 ``unavailable`` from a server shutting down, a proxy's 502) is
    tried again as a dropped connection is. After ``retries`` failed
    reconnects in a row it raises :class:`NetworkError` — or, when the last
    try was answered, that answer's :class:`FenecError`; a refusal (400
    for a query that cannot be live, 404, 403) raises the
    :class:`FenecError` of its code at once."""
    own = http is None
    client = http if http is not None else httpx.AsyncClient(timeout=_TIMEOUT)
    body = {"query": query, "params": list(params or [])}
    last = last_event_id
    failures = 0
    try:
        while True:
            try:
                async with client.stream("POST", _url(url), json=body, headers=_headers(token, last)) as resp:
                    if resp.status_code != 200:
                        await resp.aread()
                        raise _refusal(resp)
                    failures = 0
                    parser = _Parser()
                    async for line in resp.aiter_lines():
                        event = parser.feed(line)
                        if event is not None:
                            last = event.position or last
                            yield event
            except (httpx.HTTPError, FenecError) as e:
                failures = _failed(url, e, failures, retries)
            await asyncio.sleep(retry_delay if failures else 0)
    finally:
        if own:
            await client.aclose()


def watch_sync(
    url: str,
    query: str,
    params: Optional[Sequence[Any]] = None,
    *,
    token: Optional[str] = None,
    last_event_id: Optional[int] = None,
    retries: int = 10,
    retry_delay: float = 0.5,
    http: Optional[httpx.Client] = None,
) -> Generator[LiveEvent, None, None]:
    """:func:`watch` as a plain iterator, over a blocking ``httpx.Client``:
    the same events, reconnects and errors. Closing the iterator (or
    leaving a ``for`` loop over it, which closes it once collected) closes
    its connection."""
    own = http is None
    client = http if http is not None else httpx.Client(timeout=_TIMEOUT)
    body = {"query": query, "params": list(params or [])}
    last = last_event_id
    failures = 0
    try:
        while True:
            try:
                with client.stream("POST", _url(url), json=body, headers=_headers(token, last)) as resp:
                    if resp.status_code != 200:
                        resp.read()
                        raise _refusal(resp)
                    failures = 0
                    parser = _Parser()
                    for line in resp.iter_lines():
                        event = parser.feed(line)
                        if event is not None:
                            last = event.position or last
                            yield event
            except (httpx.HTTPError, FenecError) as e:
                failures = _failed(url, e, failures, retries)
            time.sleep(retry_delay if failures else 0)
    finally:
        if own:
            client.close()


# No read timeout: a live query's stream is quiet between writes (the
# server's heartbeats keep the connection, not a deadline).
_TIMEOUT = httpx.Timeout(10.0, read=None)


def _url(url: str) -> str:
    return url.rstrip("/") + "/query"


def _headers(token: Optional[str], last: Optional[int]) -> Dict[str, str]:
    headers = {"Accept": "text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if last is not None:
        headers["Last-Event-ID"] = str(last)
    return headers


def _failed(url: str, e: Exception, failures: int, retries: int) -> int:
    """The count of failures in a row after ``e``; raises once they pass
    ``retries``, or at once for a refusal. A server that cannot answer now
    (shutting down, no leader yet, a proxy's 503) is tried again like a
    dropped connection."""
    if isinstance(e, FenecError) and not e.retryable:
        raise e
    failures += 1
    if failures > retries:
        if isinstance(e, FenecError):
            raise e
        raise NetworkError(f"the live query at {url} could not reconnect: {e}", code="network") from e
    return failures


class _Parser:
    """The text/event-stream of one response, a line at a time; comments
    (the heartbeats) are skipped."""

    def __init__(self) -> None:
        self.name, self.ident, self.data = "", "", []  # type: str, str, List[str]

    def feed(self, line: str) -> Optional[LiveEvent]:
        """Takes one line; returns the event a blank line ends."""
        if line == "":
            event = None
            if self.name:
                event = LiveEvent(self.name, int(self.ident or 0), json.loads("\n".join(self.data)) if self.data else {})
            self.name, self.ident, self.data = "", "", []
            return event
        if line.startswith(":"):
            return None
        key, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "event":
            self.name = value
        elif key == "id":
            self.ident = value
        elif key == "data":
            self.data.append(value)
        return None


def _refusal(resp: httpx.Response) -> FenecError:
    try:
        body = resp.json()
        code, message = str(body.get("code", "")), str(body.get("error", ""))
    except ValueError:
        code, message = "unexpected", resp.text[:200]
    cls = ERRORS.get(code, FenecError)
    return cls(message, status=resp.status_code, code=code, leader=resp.headers.get("Fenec-Leader"))
