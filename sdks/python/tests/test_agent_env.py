"""The User-Agent every request carries, read where it lands (an HTTP
server on loopback); VERSION kept equal to pyproject.toml's; and
``connect()`` with no URL reading FENEC_URL and FENEC_TOKEN, against a real
``fenec serve``."""

from __future__ import annotations

import asyncio
import platform
import re
from typing import Iterator, List, Optional

import pytest

import fenecdb
from fenecdb import _calls

from .conftest import ROOT, LoopbackServer, QuietHandler, StartServer


@pytest.fixture
def recorder() -> Iterator[tuple[str, List[Optional[str]]]]:
    seen: List[Optional[str]] = []

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("User-Agent"))
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = b'{"affected":0}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = LoopbackServer(Handler)
    yield srv.url, seen
    srv.close()


def test_every_request_names_the_sdk_and_python(recorder: tuple[str, List[Optional[str]]]) -> None:
    url, seen = recorder
    with fenecdb.connect(url) as db:
        db.query("del jobs")

    async def once() -> None:
        async with fenecdb.connect_async(url) as adb:
            await adb.query("del jobs")

    asyncio.run(once())
    want = f"fenecdb-python/{_calls.VERSION} python/{platform.python_version()}"
    assert seen == [want, want]


def test_version_is_pyprojects() -> None:
    m = re.search(r'^version = "([^"]+)"', (ROOT / "sdks" / "python" / "pyproject.toml").read_text(), re.M)
    assert m and m.group(1) == _calls.VERSION


def test_connect_with_no_url_reads_the_environment(start_server: StartServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_server("--token", "sekret")
    monkeypatch.setenv("FENEC_URL", server.url)
    monkeypatch.setenv("FENEC_TOKEN", "sekret")
    with fenecdb.connect() as db:
        db.query("create collection notes (body text)")
    with fenecdb.connect(token="wrong") as db, pytest.raises(fenecdb.FenecError) as e:
        db.query("get notes")
    assert e.value.status == 401
    monkeypatch.delenv("FENEC_URL")
    with pytest.raises(ValueError, match="FENEC_URL is not set"):
        fenecdb.connect()
