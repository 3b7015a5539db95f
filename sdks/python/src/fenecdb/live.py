"""Live queries (docs/changes.md): a ``get`` kept up to date over
Server-Sent Events, as an async generator that reconnects where it left
off.

    async for event in fenecdb.live.watch("http://127.0.0.1:8080", "get msgs where room = $1", ["lobby"]):
        if event.name == "insert": ...

Each event is one the server sent: ``rows``/``reset`` (``data["rows"]``),
``insert``/``update`` (``data["row"]``), ``delete`` (``data["id"]``),
``gap`` and ``closing``. A dropped connection, or a ``closing`` the
server sent (shutting down, or the client fell behind), is followed by a
reconnect with ``Last-Event-ID``, so no change is missed: the server sends
nothing again, or a ``reset`` with the rows as they are now."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, List, Optional, Sequence

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
    stops iterating. After ``retries`` failed reconnects in a row it raises
    :class:`NetworkError`; a refusal (400 for a query that cannot be live,
    404, 403) raises the :class:`FenecError` of its code at once."""
    own = http is None
    client = http if http is not None else httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None))
    body = {"query": query, "params": list(params or [])}
    last = last_event_id
    failures = 0
    try:
        while True:
            headers = {"Accept": "text/event-stream"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            try:
                async with client.stream("POST", url.rstrip("/") + "/query", json=body, headers=headers) as resp:
                    if resp.status_code != 200:
                        await resp.aread()
                        raise _refusal(resp)
                    failures = 0
                    async for event in _events(resp):
                        last = event.position or last
                        yield event
            except httpx.HTTPError as e:
                failures += 1
                if failures > retries:
                    raise NetworkError(f"the live query at {url} could not reconnect: {e}", code="network") from e
            await asyncio.sleep(retry_delay if failures else 0)
    finally:
        if own:
            await client.aclose()


async def _events(resp: httpx.Response) -> AsyncIterator[LiveEvent]:
    """Parse the text/event-stream of resp into events; comments (the
    heartbeats) are skipped."""
    name, ident, data = "", "", []  # type: str, str, List[str]
    async for line in resp.aiter_lines():
        if line == "":
            if name:
                yield LiveEvent(name, int(ident or 0), json.loads("\n".join(data)) if data else {})
            name, ident, data = "", "", []
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                name = value
            elif key == "id":
                ident = value
            elif key == "data":
                data.append(value)


def _refusal(resp: httpx.Response) -> FenecError:
    try:
        body = resp.json()
        code, message = str(body.get("code", "")), str(body.get("error", ""))
    except ValueError:
        code, message = "unexpected", resp.text[:200]
    cls = ERRORS.get(code, FenecError)
    return cls(message, status=resp.status_code, code=code, leader=resp.headers.get("Fenec-Leader"))
