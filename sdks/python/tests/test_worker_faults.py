"""The workers' fault paths against a real ``fenec serve`` on the system
clock (docs/workers.md): the threaded worker's claims go through the
client's own transport, one hung lease extension holds up no other job's,
and a refused ack or fail is not sent again (only faults are)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any, Dict, List

import httpx
import pytest

import fenecdb
from fenecdb import expr

from .conftest import JOBS, Server, StartServer


@pytest.fixture
def live(start_server: StartServer) -> Server:
    return start_server("--clock", "system")


class Recording(httpx.BaseTransport):
    """A user's transport: httpx's own, which records each statement sent
    and holds the lease extensions of one job until ``release`` is set
    (at most 10 s), as a connection that hangs would."""

    def __init__(self, hang_job: int = 0) -> None:
        self.inner = httpx.HTTPTransport()
        self.hang_job = hang_job
        self.release = threading.Event()
        self.hung = 0
        self.queries: List[str] = []
        self.lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body: Dict[str, Any] = json.loads(request.read() or b"{}")
        query = str(body.get("query", ""))
        with self.lock:
            self.queries.append(query)
        params = body.get("params") or []
        if query.startswith("set jobs {run_at:") and len(params) > 1 and self.hang_job in params[1]:
            with self.lock:
                self.hung += 1
            self.release.wait(10)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.release.set()
        self.inner.close()


def enqueue(db: fenecdb.Client, n: int) -> None:
    db.from_("jobs").insert([{"payload": {}, "run_at": expr("now()"), "attempts": 0} for _ in range(n)])


def until(what: str, check: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        time.sleep(0.02)


def test_threaded_worker_claims_through_the_clients_transport(live: Server) -> None:
    """Every request of the threaded worker, its held claims too, goes
    through the transport the client was given (its TLS, proxy, auth)."""
    transport = Recording()
    with fenecdb.Client(live.url, transport=transport) as db:
        db.query(JOBS)
        enqueue(db, 2)
        ran: List[int] = []
        w = fenecdb.Worker(db.from_("jobs"), lambda row, cancel: ran.append(row["id"]), wait=1)
        w.start()
        try:
            until("both jobs run", lambda: db.from_("jobs").count() == 0)
        finally:
            w.stop()
    assert sorted(ran) == [1, 2]
    claims = [q for q in transport.queries if q.endswith("returning *")]
    assert claims, f"no claim went through the client's transport: {transport.queries}"


def test_a_hung_extension_holds_up_no_other_lease(live: Server) -> None:
    """Job 1's extensions hang: job 2's lease — another claim's, so
    another statement — is still extended on time, so after 5 s of a 2 s
    lease it is still held."""
    transport = Recording(hang_job=1)
    checked: Dict[int, bool] = {}
    started: List[int] = []
    with fenecdb.connect(live.url) as plain, fenecdb.Client(live.url, transport=transport) as db:
        plain.query(JOBS)
        enqueue(plain, 1)

        def handler(row: fenecdb.Row, cancel: threading.Event) -> None:
            if row["attempts"] > 1:
                return  # job 1 again, its lease lapsed: not what is checked
            started.append(row["id"])
            cancel.wait(5)
            held = plain.from_("jobs").where("id", row["id"]).where(fenecdb.raw("run_at > now()")).count()
            checked[row["id"]] = held == 1

        w = fenecdb.Worker(db.from_("jobs"), handler, concurrency=2, lease=2, wait=0.2, grace=0.5, on_error=lambda e: None)
        w.start()
        try:
            until("job 1 started", lambda: started == [1])
            enqueue(plain, 1)  # taken by a claim of its own
            until("job 2 checked", lambda: 2 in checked)
            assert transport.hung >= 1, "job 1's extension was not sent"
        finally:
            transport.release.set()
            w.stop()
    assert checked[2], "job 2's lease lapsed while job 1's extension hung"


FAIL = "set jobs {owner: null, error:"
"""How a fail statement starts (docs/workers.md)."""


class CountFails(httpx.BaseTransport):
    """httpx's transport, counting the fails sent through it."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.fails = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if str(json.loads(request.read() or b"{}").get("query", "")).startswith(FAIL):
            self.fails += 1
        return self.inner.handle_request(request)


class AsyncCountFails(httpx.AsyncBaseTransport):
    """httpx's asyncio transport, counting the fails sent through it."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.fails = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if str(json.loads(await request.aread() or b"{}").get("query", "")).startswith(FAIL):
            self.fails += 1
        return await self.inner.handle_async_request(request)


@pytest.mark.parametrize("kind", ["threads", "asyncio"])
def test_a_refused_fail_is_not_sent_again(kind: str, live: Server) -> None:
    """The handler makes the error field an int, so its job's fail is
    refused with a 400: reported once, and not sent again (a 4xx is no
    fault). The fails are counted as they leave the client, through its
    transport."""
    refused: List[BaseException] = []
    told: List[str] = []

    def on_error(e: fenecdb.WorkerError) -> None:
        told.append(f"{e.step}: {e.cause!r}")
        if isinstance(e.cause, fenecdb.BadRequest):
            refused.append(e.cause)

    def sabotage(db: fenecdb.Client, row: fenecdb.Row) -> None:
        db.query("drop collection jobs")
        db.query(JOBS.replace("error text", "error int"))
        db.query("put jobs {id: $1, owner: $2, attempts: 1}", [row["id"], row["owner"]])

    with fenecdb.connect(live.url) as plain:
        plain.query(JOBS)
        enqueue(plain, 1)
        # One slot: no claim is in flight while the handler changes the collection.
        opts: Dict[str, Any] = dict(concurrency=1, wait=0.2, grace=0.5, backoff=lambda n: 0.01, on_error=on_error)
        if kind == "threads":
            transport = CountFails()

            def handler(row: fenecdb.Row, cancel: threading.Event) -> None:
                sabotage(plain, row)
                raise RuntimeError("boom")

            with fenecdb.Client(live.url, transport=transport) as db:
                w = fenecdb.Worker(db.from_("jobs"), handler, **opts)
                w.start()
                try:
                    until("the refusal reported", lambda: bool(refused))
                finally:
                    w.stop()  # a fail retried goes on until the grace ends
            fails = transport.fails
        else:
            atransport = AsyncCountFails()

            async def run() -> None:
                async with fenecdb.AsyncClient(live.url, transport=atransport) as adb:

                    async def ahandler(row: fenecdb.Row) -> None:
                        await asyncio.to_thread(sabotage, plain, row)
                        raise RuntimeError("boom")

                    aw = fenecdb.AsyncWorker(adb.from_("jobs"), ahandler, **opts)
                    task = asyncio.ensure_future(aw.run())
                    deadline = time.monotonic() + 10
                    while not refused:
                        assert time.monotonic() < deadline, "the refusal was not reported"
                        await asyncio.sleep(0.02)
                    await aw.stop()
                    await task

            asyncio.run(run())
            fails = atransport.fails
    assert fails == 1, f"the refused fail was sent {fails} times; {len(told)} reports, the first: {told[:1]}"
