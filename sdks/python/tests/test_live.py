"""fenecdb.live.watch against a real ``fenec serve``: the first rows, the
events of the writes, a refusal raised, a reconnect with Last-Event-ID
across a server restart (docs/changes.md), and an answer that may succeed
later (a 503 ``unavailable``) tried again within the retries."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any, AsyncIterator, Iterator, List

import httpx
import pytest

import fenecdb
from fenecdb.live import LiveEvent, watch, watch_sync

from .conftest import LoopbackServer, QuietHandler, Server

pytestmark = pytest.mark.anyio


def _serve(fenec_bin: Path, addr: str, file: Path) -> "subprocess.Popen[str]":
    proc = subprocess.Popen(
        [str(fenec_bin), "serve", "--http", addr, "--file", str(file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = [""]
    reader = threading.Thread(target=lambda: line.__setitem__(0, proc.stdout.readline() if proc.stdout else ""))
    reader.start()
    reader.join(30)
    assert re.match(r"listening on ", line[0]), line[0]
    return proc


def _free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _query(url: str, q: str) -> int:
    r = httpx.post(url + "/query", json={"query": q})
    assert r.status_code == 200, r.text
    return int(r.headers.get("Fenec-Seq", "0"))


async def _take(events: AsyncIterator[LiveEvent], n: int) -> List[LiveEvent]:
    out = []
    for _ in range(n):
        out.append(await events.__anext__())
    return out


async def test_live_query_reconnects(fenec_bin: Path, tmp_path: Path, anyio_backend: str) -> None:
    addr, file = _free_addr(), tmp_path / "live.db"
    url = "http://" + addr
    proc = _serve(fenec_bin, addr, file)
    try:
        _query(url, "create collection msgs (room text, text text)")
        _query(url, 'put msgs {room: "a", text: "one"}')
        events = watch(url, "get msgs where room = $1 select text", ["a"], retry_delay=0.1, retries=100)
        [first] = await _take(events, 1)
        assert first.name == "rows" and first.data["rows"] == [{"id": 1, "text": "one"}]
        seq = _query(url, 'put msgs {room: "a", text: "two"}')
        _query(url, 'put msgs {room: "b", text: "elsewhere"}')
        [ins] = await _take(events, 1)
        assert (ins.name, ins.position, ins.data["row"]) == ("insert", seq, {"id": 2, "text": "two"})

        proc.terminate()
        proc.wait(20)
        [closing] = await _take(events, 1)
        assert closing.name == "closing" and closing.data["reason"] == "shutdown"

        # The generator reconnects (Last-Event-ID) to the restarted server,
        # which has nothing new to send, and goes on with the next write.
        proc = _serve(fenec_bin, addr, file)
        pending = events.__anext__()
        waiter = threading.Event()

        def write_when_back() -> None:
            # Written once the stream is open again: the server counts it.
            for _ in range(500):
                m = re.search(r"^fenec_changes_subscribers (\S+)$", httpx.get(url + "/_metrics").text, re.M)
                if m and float(m.group(1)) == 1:
                    break
                waiter.wait(0.02)
            _query(url, 'set msgs {text: "one!"} where id = 1')

        t = threading.Thread(target=write_when_back)
        t.start()
        upd = await pending
        t.join()
        assert upd.name == "update" and upd.data["row"] == {"id": 1, "text": "one!"}
        await events.aclose()  # type: ignore[attr-defined]
    finally:
        proc.terminate()
        proc.wait(20)


def _subscribers(url: str) -> float:
    m = re.search(r"^fenec_changes_subscribers (\S+)$", httpx.get(url + "/_metrics").text, re.M)
    return float(m.group(1)) if m else 0.0


def test_live_query_blocking_reconnects(fenec_bin: Path, tmp_path: Path) -> None:
    """watch_sync: the same events, and the same reconnect across a
    restart, as a plain iterator."""
    addr, file = _free_addr(), tmp_path / "live.db"
    url = "http://" + addr
    proc = _serve(fenec_bin, addr, file)
    try:
        _query(url, "create collection msgs (room text, text text)")
        _query(url, 'put msgs {room: "a", text: "one"}')
        events = watch_sync(url, "get msgs where room = $1 select text", ["a"], retry_delay=0.1, retries=100)
        first = next(events)
        assert first.name == "rows" and first.data["rows"] == [{"id": 1, "text": "one"}]
        seq = _query(url, 'put msgs {room: "a", text: "two"}')
        _query(url, 'put msgs {room: "b", text: "elsewhere"}')
        ins = next(events)
        assert (ins.name, ins.position, ins.data["row"]) == ("insert", seq, {"id": 2, "text": "two"})

        proc.terminate()
        proc.wait(20)
        closing = next(events)
        assert closing.name == "closing" and closing.data["reason"] == "shutdown"

        proc = _serve(fenec_bin, addr, file)
        stop = threading.Event()

        def write_when_back() -> None:
            for _ in range(500):
                if _subscribers(url) == 1:
                    break
                stop.wait(0.02)
            _query(url, 'set msgs {text: "one!"} where id = 1')

        t = threading.Thread(target=write_when_back)
        t.start()
        upd = next(events)  # reconnected with Last-Event-ID: nothing again, then the update
        t.join()
        assert upd.name == "update" and upd.data["row"] == {"id": 1, "text": "one!"}
        events.close()
        # Closing the iterator closes its connection.
        for _ in range(500):
            if _subscribers(url) == 0:
                break
            stop.wait(0.02)
        assert _subscribers(url) == 0
    finally:
        proc.terminate()
        proc.wait(20)


async def test_live_query_refused(fenec_bin: Path, tmp_path: Path, anyio_backend: str) -> None:
    addr = _free_addr()
    proc = _serve(fenec_bin, addr, tmp_path / "r.db")
    try:
        url = "http://" + addr
        _query(url, "create collection msgs (n int)")
        with pytest.raises(fenecdb.BadRequest, match="a live query takes no order"):
            await _take(watch(url, "get msgs order n"), 1)
        with pytest.raises(fenecdb.NotFound):
            await _take(watch(url, "get nothere"), 1)
    finally:
        proc.terminate()
        proc.wait(20)


class RefusingProxy(LoopbackServer):
    """A loopback proxy that answers the first ``refuse`` requests 503
    ``unavailable``, as a server shutting down does, and streams every
    later one through to ``target`` (its answer's end: the connection's)."""

    def __init__(self, target: str, refuse: int) -> None:
        self.refuse, self.refused = refuse, 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with proxy.lock:
                    refusing = proxy.refused < proxy.refuse
                    proxy.refused += refusing
                if refusing:
                    text = json.dumps({"error": "the server is shutting down", "code": "unavailable"}).encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    self.wfile.write(text)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
                try:
                    with httpx.stream("POST", target + self.path, content=body, headers=headers, timeout=httpx.Timeout(10, read=None)) as r:
                        self.send_response(r.status_code)
                        for k, v in r.headers.items():
                            if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                                self.send_header(k, v)
                        self.end_headers()
                        for chunk in r.iter_raw():
                            self.wfile.write(chunk)
                            self.wfile.flush()
                except (OSError, httpx.HTTPError):
                    return  # the client or the server went away

        super().__init__(Handler)


@pytest.fixture
def msgs(server: Server) -> Iterator[str]:
    """The server's URL, with one message in ``msgs``."""
    _query(server.url, "create collection msgs (text text)")
    _query(server.url, 'put msgs {text: "one"}')
    yield server.url


async def test_live_query_tries_a_503_again(msgs: str, anyio_backend: str) -> None:
    """Two 503s, then the stream: within retries=2 the generator goes on
    to the rows, where a refusal would have ended it."""
    proxy = RefusingProxy(msgs, 2)
    try:
        events = watch(proxy.url, "get msgs select text", retries=2, retry_delay=0.01)
        [first] = await _take(events, 1)
        assert first.name == "rows" and first.data["rows"] == [{"id": 1, "text": "one"}]
        assert proxy.refused == 2
        await events.aclose()  # type: ignore[attr-defined]
    finally:
        proxy.close()


async def test_live_query_gives_up_after_its_retries_of_503s(msgs: str, anyio_backend: str) -> None:
    """503s past the retries: the last answer's error is raised."""
    proxy = RefusingProxy(msgs, 100)
    try:
        with pytest.raises(fenecdb.Unavailable, match="shutting down"):
            await _take(watch(proxy.url, "get msgs select text", retries=2, retry_delay=0.01), 1)
        assert proxy.refused == 3
    finally:
        proxy.close()


def test_live_query_blocking_tries_a_503_again(msgs: str) -> None:
    """watch_sync: the same, on a plain iterator."""
    proxy = RefusingProxy(msgs, 2)
    try:
        events = watch_sync(proxy.url, "get msgs select text", retries=2, retry_delay=0.01)
        first = next(events)
        assert first.name == "rows" and first.data["rows"] == [{"id": 1, "text": "one"}]
        assert proxy.refused == 2
        events.close()
        proxy.refuse = proxy.refused + 100
        with pytest.raises(fenecdb.Unavailable):
            next(watch_sync(proxy.url, "get msgs select text", retries=1, retry_delay=0.01))
    finally:
        proxy.close()
