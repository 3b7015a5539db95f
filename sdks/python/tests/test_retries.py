"""Opt-in retries (``max_retries``) against a real ``fenec serve``, through
a loopback proxy that forwards each request and, when told to, drops the
server's answer — the write applied, its answer lost: a retried write,
sent under its idempotency key, is applied once. Also what an error
names, and the error classes' hierarchy with the older names."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, Iterator, List

import httpx
import pytest

import fenecdb

from .conftest import LoopbackServer, QuietHandler, Server


class DroppingProxy(LoopbackServer):
    """Forwards every request to ``target``; the first ``drop`` answers of
    /query and /batch are thrown away and the connection closed, as a
    network that broke after the server applied the request."""

    def __init__(self, target: str) -> None:
        self.drop = 0
        self.seen: List[Dict[str, str]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
                r = httpx.request(self.command, target + self.path, content=body, headers=headers, timeout=10)
                with proxy.lock:
                    proxy.seen.append(
                        {"path": self.path, "key": self.headers.get("Idempotency-Key", ""), "after": self.headers.get("Fenec-After", "")}
                    )
                    dropping = proxy.drop > 0 and self.path in ("/query", "/batch")
                    if dropping:
                        proxy.drop -= 1
                if dropping:
                    self.close_connection = True  # no answer: the client sees the connection end
                    return
                self.relay(r)

            do_GET = do_POST  # a builder's call loads the schema: GET /collections

        super().__init__(Handler)


@pytest.fixture
def proxied(server: Server) -> Iterator[DroppingProxy]:
    with fenecdb.connect(server.url) as db:
        db.query("create collection notes (body text)")
    p = DroppingProxy(server.url)
    yield p
    p.close()


def count(server: Server) -> int:
    with fenecdb.connect(server.url) as db:
        rows = db.query("get notes count")
        assert isinstance(rows, list)
        return int(rows[0]["count"])


def test_a_retried_write_applies_once(server: Server, proxied: DroppingProxy) -> None:
    proxied.drop = 2
    with fenecdb.connect(proxied.url, max_retries=3) as db:
        got = db.query("insert notes {body: $1}", ["once"])
    assert got == 1 and got.replayed, "the retry was not answered from the first write"
    assert count(server) == 1
    keys = [s["key"] for s in proxied.seen if s["path"] == "/query"]
    assert len(keys) == 3 and keys[0] and len(set(keys)) == 1, f"the tries' keys: {keys}"


def test_a_retried_async_batch_applies_once(server: Server, proxied: DroppingProxy) -> None:
    proxied.drop = 1

    async def main() -> fenecdb.Results:
        async with fenecdb.connect_async(proxied.url, max_retries=2) as db:
            return await db.batch(["insert notes {body: 'a'}", "insert notes {body: 'b'}"], idempotency_key="k-batch")

    results = asyncio.run(main())
    assert list(results) == [1, 1] and results.replayed
    assert count(server) == 2
    assert [s["key"] for s in proxied.seen if s["path"] == "/batch"] == ["k-batch", "k-batch"]


def test_no_retries_by_default_and_the_error_names_the_call(server: Server, proxied: DroppingProxy) -> None:
    proxied.drop = 1
    with fenecdb.connect(proxied.url) as db, pytest.raises(fenecdb.ConnectionFailed) as info:
        db.query("insert notes {body: $1}", ["x" * 300])
    e = info.value
    assert isinstance(e, fenecdb.NetworkError) and e.retryable
    assert (e.method, e.node, e.idempotency_key) == ("POST", proxied.url, None)
    assert e.statement is not None and e.statement.startswith("insert notes {body: $1}") and len(e.statement) <= 200
    assert count(server) == 1  # applied: its answer was lost
    assert [s["key"] for s in proxied.seen if s["path"] == "/query"] == [""]


def test_a_refusal_is_not_retried(server: Server, proxied: DroppingProxy) -> None:
    with fenecdb.connect(proxied.url, max_retries=3) as db, pytest.raises(fenecdb.StatusError) as info:
        db.query("insert nowhere {body: 1}")
    assert isinstance(info.value, fenecdb.NotFound) and not info.value.retryable
    assert len([s for s in proxied.seen if s["path"] == "/query"]) == 1


def test_after_is_sent_as_fenec_after(server: Server, proxied: DroppingProxy) -> None:
    """``after=`` goes out as Fenec-After with the value given, on a query,
    a batch and a builder read; a lone server refuses at once (400) a seq
    beyond its own writes (docs/http.md); a bad value is sent nothing."""

    def sent() -> List[str]:
        with proxied.lock:
            return [s["after"] for s in proxied.seen if s["path"] in ("/query", "/batch")]

    with fenecdb.connect(proxied.url) as db:
        seq = db.query("insert notes {body: $1}", ["x"]).seq
        assert seq > 0 and sent() == [""], "Fenec-After sent without after, to one URL"
        assert db.from_("notes").count(after=seq) == 1
        assert db.from_("notes").rows(after=seq)[0]["body"] == "x"
        batch = db.batch(["get notes count"], after=seq)
        assert len(batch) == 1
        assert db.query("get notes count", after=seq) is not None
        assert sent()[1:] == [str(seq)] * 4
        with pytest.raises(fenecdb.StatusError) as info:
            db.from_("notes").first(after=seq + 1000)
        assert info.value.status == 400 and "Fenec-After" in str(info.value), str(info.value)
        assert sent()[-1] == str(seq + 1000)
        n = len(sent())
        for bad in (-1, 2**53, 1.5, True):
            with pytest.raises(ValueError, match="after is a whole number"):
                db.query("get notes", after=bad)  # type: ignore[arg-type]
        assert len(sent()) == n, "a bad after was sent"


def test_after_async_takes_the_larger_of_it_and_the_nodes_seq(server: Server, proxied: DroppingProxy) -> None:
    """Given several URLs (the first answers; the second is never asked),
    the larger of ``after`` and the highest seq the nodes answered is sent."""

    async def main() -> int:
        async with fenecdb.connect_async([proxied.url, server.url]) as db:
            seq = (await db.query("insert notes {body: 'a'}")).seq
            assert await db.from_("notes").count(after=0) == 1
            with pytest.raises(fenecdb.StatusError) as info:
                await db.from_("notes").count(after=seq + 5)
            assert info.value.status == 400
            return seq

    seq = asyncio.run(main())
    with proxied.lock:
        afters = [s["after"] for s in proxied.seen if s["path"] == "/query"]
    assert afters[-2:] == [str(seq), str(seq + 5)], afters


def test_the_hierarchy_keeps_the_older_names() -> None:
    assert fenecdb.NetworkError is fenecdb.ConnectionFailed
    assert fenecdb.Timeout is fenecdb.TimedOut
    assert issubclass(fenecdb.TimedOut, fenecdb.ConnectionFailed) and issubclass(fenecdb.TimedOut, TimeoutError)
    for cls in (fenecdb.Unmet, fenecdb.Conflict, fenecdb.Unavailable, fenecdb.UnexpectedAnswer):
        assert issubclass(cls, fenecdb.StatusError) and issubclass(cls, fenecdb.FenecError)
    assert not issubclass(fenecdb.ConnectionFailed, fenecdb.StatusError)


def test_max_retries_is_checked() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        fenecdb.connect("http://127.0.0.1:1", max_retries=-1)
    with pytest.raises(ValueError, match="proxy"):
        fenecdb.connect("http://127.0.0.1:1", proxy="not a url")
