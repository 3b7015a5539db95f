"""Fixtures: a real ``fenec serve --clock manual`` per test that asks for one."""

from __future__ import annotations

import http.server
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import httpx
import pytest

from fenecdb import _generated as api

ROOT = Path(__file__).resolve().parents[3]
"""The repository root."""

NO_BINARY = (
    "no fenec binary: set FENEC_BIN=/path/to/fenec, or install Go and run make build"
    " (make dist writes dist/fenec)"
)


@pytest.fixture(scope="session")
def fenec_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server binary: $FENEC_BIN, else bin/fenec (``make build``), else
    one built from server/ for this run."""
    if "FENEC_BIN" in os.environ:
        return Path(os.environ["FENEC_BIN"])
    built = ROOT / "bin" / "fenec"
    if built.exists():
        return built
    if shutil.which("go") is None:
        pytest.exit(NO_BINARY, returncode=1)
    out = tmp_path_factory.mktemp("bin") / "fenec"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/fenec"], cwd=ROOT / "server", check=True)
    return out


class Server:
    """A running ``fenec serve``; stopped by the fixture."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url

    def advance(self, ms: int) -> None:
        """Move the manual clock on."""
        with httpx.Client(base_url=self.url) as http:
            r = api.move_clock(http, {"advance_ms": ms})
        assert r.ok, r.text

    def held_claims(self) -> float:
        """The server's ``fenec_held_claims`` gauge."""
        with httpx.Client(base_url=self.url) as http:
            r = api.metrics(http)
        assert r.ok, r.text
        m = re.search(r"^fenec_held_claims (\S+)$", r.answer(), re.M)
        assert m, "no fenec_held_claims in /_metrics"
        return float(m.group(1))

    def until_held(self, n: int, timeout: float = 5) -> None:
        """Waits until ``n`` claims are held at the server."""
        deadline = time.monotonic() + timeout
        while (held := self.held_claims()) != n:
            assert time.monotonic() < deadline, f"{held:g} claims held at the server after {timeout} s, not {n}"
            time.sleep(0.01)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


StartServer = Callable[..., Server]


@pytest.fixture
def start_server(fenec_bin: Path) -> Iterator[StartServer]:
    """Starts fresh servers (``:memory:``, manual clock) with extra flags;
    each is stopped at the end of the test."""
    servers: List[Server] = []

    def start(*flags: str) -> Server:
        proc = subprocess.Popen(
            [str(fenec_bin), "serve", "--clock", "manual", "--http", "127.0.0.1:0", "--file", ":memory:", *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        line = [""]
        reader = threading.Thread(target=lambda: line.__setitem__(0, proc.stdout.readline() if proc.stdout else ""))
        reader.start()
        reader.join(30)
        m = re.match(r"listening on (\S+)", line[0])
        if not m:
            proc.kill()
            raise RuntimeError(f"fenec serve printed {line[0]!r}, not 'listening on <addr>'")
        server = Server(proc, f"http://{m.group(1)}")
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def server(start_server: StartServer) -> Server:
    """A fresh server without a token."""
    return start_server()


JOBS = "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)"
"""The seed page's queue."""


@pytest.fixture
def anyio_backend() -> str:
    """The async tests (marked ``anyio``) run on asyncio."""
    return "asyncio"


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """The base of the tests' loopback servers' handlers: logs nothing."""

    def relay(self, r: httpx.Response) -> None:
        """Answers this request with ``r``, an answer the real server gave:
        its status, its headers but the hop-by-hop ones, its (decoded) body."""
        self.send_response(r.status_code)
        for k, v in r.headers.items():
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "content-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(r.content)))
        self.end_headers()
        self.wfile.write(r.content)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class LoopbackServer:
    """An HTTP server on a free loopback port, serving ``handler`` from a
    thread of its own until ``close``."""

    def __init__(self, handler: "type[http.server.BaseHTTPRequestHandler]") -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Proxy(LoopbackServer):
    """A local HTTP server that answers every request as a broken proxy
    would — a 502 with an HTML page — and keeps what it was sent."""

    def __init__(self) -> None:
        seen: List[Tuple[str, Dict[str, str], bytes]] = []
        self.seen = seen

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen.append((self.path, dict(self.headers.items()), body))
                page = b"<html><head><title>502 Bad Gateway</title></head><body>upstream gone</body></html>"
                self.send_response(502)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            do_GET = do_POST

        super().__init__(Handler)


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    p = Proxy()
    yield p
    p.close()


@pytest.fixture
def silent_url() -> Iterator[str]:
    """The URL of a socket that takes connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def refused_url() -> str:
    """The URL of a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


_given_ports: Set[int] = set()


def free_port() -> int:
    """A loopback port free now, never one given before in this process: a
    cluster picks all its ports before any node binds, and the kernel may
    hand a port just closed out again."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port not in _given_ports:
            _given_ports.add(port)
            return port


class Node:
    """One node of a :class:`Cluster`: a real ``fenec serve --node-id``."""

    def __init__(self, id: str, proc: subprocess.Popen[str], url: str) -> None:
        self.id = id
        self.proc = proc
        self.url = url

    @property
    def up(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: a crash."""
        self.proc.kill()
        self.proc.wait(10)


class Cluster:
    """Three real ``fenec serve`` nodes on loopback, started as
    server/cmd/fenec/cluster_test.go does (docs/cluster.md), with a token."""

    token = "cluster-token"

    def __init__(self, fenec_bin: Path, tmp: Path, n: int = 3) -> None:
        specs = [(f"n{i}", f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}") for i in range(1, n + 1)]
        bootstrap = ",".join(f"{id}={raft}" for id, _, raft in specs)
        self.nodes: List[Node] = []
        try:
            for id, http, raft in specs:
                log = tmp / f"{id}.log"
                proc = subprocess.Popen(
                    [str(fenec_bin), "serve", "--http", http, "--file", str(tmp / f"{id}.db"), "--node-id", id,
                     "--raft", raft, "--bootstrap", bootstrap, "--token", self.token],
                    stdout=subprocess.PIPE,
                    stderr=log.open("w"),
                    text=True,
                )
                self.nodes.append(Node(id, proc, f"http://{http}"))
                _await_listening(proc, log)
            self.leader()
        except BaseException:
            self.stop()
            raise

    def http(self, node: Node) -> httpx.Client:
        return httpx.Client(base_url=node.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=5)

    def leader(self, within: float = 20) -> Node:
        """The node that leads and takes a write, waited for."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            for node in self.nodes:
                if not node.up:
                    continue
                try:
                    with self.http(node) as h:
                        st = h.get("/_cluster")
                        if st.status_code != 200 or st.json().get("role") != "leader":
                            continue
                        w = h.post("/query", json={"query": "create collection if not exists probes (k int)", "params": []})
                        if w.status_code == 200:
                            return node
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        raise AssertionError(f"no node of the cluster led and took a write within {within} s")

    def metric(self, node: Node, name: str, label: str = "") -> float:
        """The sum of a node's samples of ``name`` whose labels hold ``label``."""
        with self.http(node) as h:
            text = h.get("/_metrics").text
        total = 0.0
        for m in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M):
            if label in (m.group(1) or ""):
                total += float(m.group(2))
        return total

    def stop(self) -> None:
        for node in self.nodes:
            if node.up:
                node.kill()


def _await_listening(proc: subprocess.Popen[str], log: Optional[Path] = None) -> None:
    """Waits (30 s at most) for ``listening on`` on a server's stdout; a
    server that does not say it is named with the end of its ``log``
    (its stderr), if given."""
    assert proc.stdout is not None
    out = proc.stdout
    seen: List[str] = []

    def read() -> None:
        for line in out:
            seen.append(line)
            if line.startswith("listening on"):
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)
    if not seen or not seen[-1].startswith("listening on"):
        proc.kill()
        proc.wait(10)
        said = "" if log is None else f"; its stderr ends: {log.read_text()[-2000:]!r}"
        raise RuntimeError(f"fenec serve printed {''.join(seen)!r}, not 'listening on <addr>' (exit {proc.returncode}){said}")


@pytest.fixture
def cluster(fenec_bin: Path, tmp_path: Path) -> Iterator[Cluster]:
    """A fresh three-node cluster; its nodes are killed at the end."""
    c = Cluster(fenec_bin, tmp_path)
    yield c
    c.stop()
