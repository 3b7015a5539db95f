"""The worker rules of docs/workers.md, for ``Worker`` and ``AsyncWorker``
both, against a real ``fenec serve`` on the system clock: acks batched (a
lost lease inside a batch told apart), claims sized to half the slots,
failures logged by default with the error's message stored, a stop asked
from inside a handler, ``run_until_empty``, and the deprecated names."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import httpx
import pytest

import fenecdb
from fenecdb import expr

from .conftest import LoopbackServer, QuietHandler, JOBS, Server, StartServer

Body = Callable[[fenecdb.Row], None]
"""A job's work, the same for both kinds: run in a thread of the worker's
pool (threads) or through ``asyncio.to_thread`` (asyncio)."""


@pytest.fixture
def live(start_server: StartServer) -> Server:
    return start_server("--clock", "system")


@pytest.fixture
def db(live: Server) -> Iterator[fenecdb.Client]:
    with fenecdb.connect(live.url) as client:
        client.query(JOBS)
        yield client


@pytest.fixture(params=["threads", "asyncio"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def enqueue(db: fenecdb.Client, n: int, **fields: Any) -> None:
    db.from_("jobs").insert([{"payload": {}, "run_at": expr("now()"), "attempts": 0, **fields} for _ in range(n)])


def until(what: str, check: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        time.sleep(0.01)


class Statements:
    """The statements a client sent, read from its requests as they leave
    (httpx's own transport underneath): a ``/batch`` counts one request."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: List[List[Dict[str, Any]]] = []
        self.waits: List[Optional[str]] = []  # each request's Fenec-Wait

    def saw(self, body: bytes, wait: Optional[str] = None) -> None:
        doc = json.loads(body or b"{}")
        with self.lock:
            self.requests.append(doc["statements"] if "statements" in doc else [doc])
            self.waits.append(wait)

    def claim_waits(self) -> List[Optional[str]]:
        """The Fenec-Wait of each claim sent, in order."""
        with self.lock:
            return [w for r, w in zip(self.requests, self.waits) if any(str(s.get("query", "")).startswith("set jobs {owner: $1") for s in r)]

    def sent(self, start: str) -> List[List[Dict[str, Any]]]:
        """The requests holding a statement that starts with ``start``."""
        with self.lock:
            return [r for r in self.requests if any(str(s.get("query", "")).startswith(start) for s in r)]


class Counting(httpx.BaseTransport):
    def __init__(self, seen: Statements) -> None:
        self.inner, self.seen = httpx.HTTPTransport(), seen

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.saw(request.read(), request.headers.get("Fenec-Wait"))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


class AsyncCounting(httpx.AsyncBaseTransport):
    def __init__(self, seen: Statements) -> None:
        self.inner, self.seen = httpx.AsyncHTTPTransport(), seen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.saw(await request.aread(), request.headers.get("Fenec-Wait"))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Running:
    """A worker of either kind run in the background: :meth:`stop` stops
    it; :meth:`join` waits for its run to return."""

    def __init__(self, kind: str, url: str, body: Body, seen: Optional[Statements] = None,
                 until_empty: bool = False, tune: Optional[Callable[[Any], None]] = None,
                 token: Optional[str] = None, **options: Any) -> None:
        self.returned = threading.Event()
        self.error: List[BaseException] = []
        self.worker: Any = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        ready = threading.Event()

        def sync_main() -> None:
            transport = Counting(seen) if seen else None
            with fenecdb.connect(url, token=token, transport=transport) as client:
                self.worker = fenecdb.Worker(client.from_("jobs"), lambda row, cancel: body(row), **options)
                if tune:
                    tune(self.worker)
                ready.set()
                (self.worker.run_until_empty if until_empty else self.worker.run)()

        async def async_main() -> None:
            self.loop = asyncio.get_running_loop()
            transport = AsyncCounting(seen) if seen else None
            async with fenecdb.connect_async(url, token=token, transport=transport) as client:

                async def handler(row: fenecdb.Row) -> None:
                    await asyncio.to_thread(body, row)

                self.worker = fenecdb.AsyncWorker(client.from_("jobs"), handler, **options)
                if tune:
                    tune(self.worker)
                ready.set()
                await (self.worker.run_until_empty() if until_empty else self.worker.run())

        def main() -> None:
            try:
                sync_main() if kind == "threads" else asyncio.run(async_main())
            except BaseException as e:  # the test reads it
                self.error.append(e)
            finally:
                ready.set()
                self.returned.set()

        self.kind = kind
        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        ready.wait(10)

    def stop(self) -> None:
        if self.kind == "threads":
            self.worker.stop()
        else:
            assert self.loop is not None
            asyncio.run_coroutine_threadsafe(self.worker.stop(), self.loop).result(60)
        self.join(60)

    def join(self, timeout: float) -> None:
        assert self.returned.wait(timeout), f"the worker's run did not return in {timeout} s"
        assert not self.error, f"the worker's run raised {self.error[0]!r}"


def test_acks_are_batched(kind: str, live: Server, db: fenecdb.Client) -> None:
    """200 jobs through one worker of concurrency 10: every job acked, in
    far fewer ack requests than jobs (each a `del … where id in $1 and
    owner = $2 returning id`, several owners' in one /batch)."""
    n = 200
    enqueue(db, n)
    seen = Statements()
    done: List[int] = []
    w = Running(kind, live.url, lambda row: done.append(row["id"]), seen, until_empty=True, concurrency=10)
    w.join(60)
    assert sorted(done) == list(range(1, n + 1))
    assert db.from_("jobs").count() == 0
    acks = seen.sent("del jobs where id in $1 and owner = $2 returning id")
    acked = sum(len(s["params"][0]) for r in acks for s in r)
    assert acked == n, f"{acked} ids acked for {n} jobs"
    assert len(acks) <= n / 4, f"{len(acks)} ack requests for {n} jobs"
    assert not seen.sent("del jobs where id = ")


def test_a_lost_lease_inside_a_batch(kind: str, live: Server, db: fenecdb.Client) -> None:
    """Two jobs of one claim end together and are acked in one statement;
    job 1's owner was moved meanwhile: its id is missing from the answer,
    a lost lease reported, and job 2 acked."""
    enqueue(db, 2)
    seen = Statements()
    gate = threading.Barrier(2, timeout=10)
    reports: List[fenecdb.WorkerError] = []

    def body(row: fenecdb.Row) -> None:
        if row["id"] == 1:
            db.query("set jobs {owner: $1} where id = $2", ["thief", 1])
        gate.wait()

    w = Running(kind, live.url, body, seen, until_empty=True, concurrency=2, on_error=reports.append)
    w.join(20)
    rows = db.from_("jobs").rows()
    assert [(r["id"], r["owner"]) for r in rows] == [(1, "thief")]
    assert [(e.step, e.job_id) for e in reports] == [("lost_lease", 1)]
    assert isinstance(reports[0].cause, fenecdb.LostLease)
    batched = [s for r in seen.sent("del jobs") for s in r if sorted(s["params"][0]) == [1, 2]]
    assert batched, f"the two acks were not sent together: {seen.sent('del jobs')}"


def test_acks_go_with_the_next_claim(kind: str, live: Server, db: fenecdb.Client) -> None:
    """A worker that runs (not until empty) and claims again as its last
    job ends sends that job's ack in the claim's request: a /batch of the
    ack's statement, then the claim. Job 1's owner was moved meanwhile:
    its id is missing from the answer, a lost lease reported; job 2 acked
    (docs/workers.md, "Claim")."""
    enqueue(db, 2)
    seen = Statements()
    reports: List[fenecdb.WorkerError] = []
    done: List[int] = []

    def body(row: fenecdb.Row) -> None:
        if row["id"] == 1:
            db.query("set jobs {owner: $1} where id = $2", ["thief", 1])
        done.append(row["id"])

    w = Running(kind, live.url, body, seen, concurrency=1, on_error=reports.append)
    try:
        until("job 2 acked", lambda: [r["id"] for r in db.from_("jobs").rows()] == [1])
        live.until_held(1)
    finally:
        w.stop()
    assert done == [1, 2]
    assert [(e.step, e.job_id) for e in reports] == [("lost_lease", 1)]
    carried = [r for r in seen.requests if len(r) > 1 and str(r[-1].get("query", "")).startswith("set jobs {owner: $1")]
    assert [[st["params"][0] for st in r[:-1]] for r in carried] == [[[1]], [[2]]], seen.requests
    assert all(str(st["query"]).startswith("del jobs where id in $1") for r in carried for st in r[:-1])
    assert all(len(r) > 1 for r in seen.sent("del jobs")), "an ack sent alone"


def hs256(claims: Dict[str, Any], secret: str) -> str:
    """A JWT signed with HS256 (docs/access.md)."""
    def part(v: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(v).encode()).rstrip(b"=").decode()

    body = f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}"
    sig = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return f"{body}.{base64.urlsafe_b64encode(sig).rstrip(b'=').decode()}"


def test_an_ack_refused_inside_the_claims_request(kind: str, start_server: StartServer, tmp_path: Path) -> None:
    """A token whose policy lets it claim and read jobs but delete none
    (docs/access.md): the ack that goes with the next claim is refused,
    403 at statement 0, and none of the /batch ran. The ack is reported
    as a refused ack is and not sent again; the claim is sent again alone,
    not held, and held only once it found nothing (docs/workers.md,
    "Claim")."""
    policy = tmp_path / "policy.txt"
    policy.write_text("jobs read for worker\njobs update(owner, run_at, attempts) for worker\n")
    secret = "a-secret-of-at-least-thirty-two-bytes"
    live = start_server("--clock", "system", "--token", "admin", "--jwt-secret", secret, "--policy", str(policy))
    with fenecdb.connect(live.url, token="admin") as admin:
        admin.query(JOBS)
        enqueue(admin, 1)
    token = hs256({"sub": "w", "role": "worker", "exp": int(time.time()) + 3600}, secret)
    seen = Statements()
    reports: List[fenecdb.WorkerError] = []
    ran: List[int] = []
    w = Running(kind, live.url, lambda row: ran.append(row["id"]), seen, token=token,
                concurrency=1, wait=0.5, on_error=reports.append)
    try:
        until("a claim held", lambda: "500" in seen.claim_waits())
    finally:
        w.stop()
    assert ran == [1]
    assert [(e.step, e.job_id) for e in reports] == [("ack", 1)], seen.requests
    cause = reports[0].cause
    assert isinstance(cause, fenecdb.FenecError) and cause.status == 403 and cause.at == 0, (cause, [[str(st.get("query", ""))[:8] for st in r] for r in seen.requests], seen.waits)
    with seen.lock:
        sent = [([str(st.get("query", ""))[:8] for st in r], wait) for r, wait in zip(seen.requests, seen.waits) if r != [{}]]
    held = [wait for _, wait in sent].index("500")
    assert sent[: held + 1] == [
        (["set jobs"], "0"),
        (["del jobs", "set jobs"], "0"),
        (["set jobs"], "0"),
        (["set jobs"], "500"),
    ], sent
    assert len(seen.sent("del jobs")) == 1, "a refused ack was sent again"


def long_ack_window(worker: Any) -> None:
    """A window of 30 s in place of 5 ms: an ack sent within the test's
    time is one the window's early close sent."""
    worker._ack_wait = 30.0


def test_a_lone_jobs_ack_is_sent_at_once(kind: str, live: Server, db: fenecdb.Client) -> None:
    """One job, no other handler running: its ack closes the window at
    once (docs/workers.md, "Ack"), not after the window's time."""
    seen = Statements()
    w = Running(kind, live.url, lambda row: None, seen, tune=long_ack_window, concurrency=4, on_error=lambda e: None)
    try:
        enqueue(db, 1)
        until("the lone job acked", lambda: db.from_("jobs").count() == 0, timeout=5)
        acks = [s for r in seen.sent("del jobs") for s in r if str(s["query"]).startswith("del jobs")]
        assert [s["params"][0] for s in acks] == [[1]]
    finally:
        w.stop()


def test_the_ack_window_stays_open_while_a_handler_runs(kind: str, live: Server, db: fenecdb.Client) -> None:
    """Two jobs of one claim: the first to end is not acked while the
    other runs; once it ends, both go in one statement, at once."""
    enqueue(db, 2)
    seen = Statements()
    gate = threading.Event()
    ended: List[int] = []

    def body(row: fenecdb.Row) -> None:
        if row["id"] == 2:
            gate.wait(20)
        ended.append(row["id"])

    w = Running(kind, live.url, body, seen, tune=long_ack_window, concurrency=2, on_error=lambda e: None)
    try:
        until("job 1 ended", lambda: ended == [1])
        time.sleep(0.3)  # an ack, if one were sent for job 1 alone, is in by now
        assert db.from_("jobs").count() == 2 and not seen.sent("del jobs"), "job 1 acked while job 2 ran"
        gate.set()
        until("both acked", lambda: db.from_("jobs").count() == 0, timeout=5)
        assert [sorted(s["params"][0]) for r in seen.sent("del jobs") for s in r] == [[1, 2]]
    finally:
        gate.set()
        w.stop()


def test_a_claim_waits_for_half_the_slots(kind: str, live: Server, db: fenecdb.Client) -> None:
    """Concurrency 4, four jobs running: one ending frees one slot (below
    half: no claim sent); a second frees half: one claim, held."""
    enqueue(db, 4)
    gates = {i: threading.Event() for i in range(1, 5)}
    started: List[int] = []
    def body(row: fenecdb.Row) -> None:
        started.append(row["id"])
        gates[row["id"]].wait(20)

    w = Running(kind, live.url, body, concurrency=4, on_error=lambda e: None)
    try:
        until("four jobs started", lambda: len(started) == 4)
        assert live.held_claims() == 0
        gates[1].set()
        until("job 1 acked", lambda: db.from_("jobs").count() == 3)
        time.sleep(0.2)  # a claim, if one were sent for the one slot, is held by now
        assert live.held_claims() == 0, "a claim was sent with one of four slots free"
        gates[2].set()
        live.until_held(1)
    finally:
        for g in gates.values():
            g.set()
        w.stop()


def test_claims_are_held_only_once_one_finds_nothing(kind: str, live: Server, db: fenecdb.Client) -> None:
    """While claims take jobs, the next is sent with Fenec-Wait 0
    (answered at once: a stop has nothing to give up); once one finds
    none, the next is held (docs/workers.md, "Claim")."""
    enqueue(db, 30)
    seen = Statements()
    done: List[int] = []
    w = Running(kind, live.url, lambda row: done.append(row["id"]), seen, concurrency=10, on_error=lambda e: None)
    try:
        until("30 jobs done", lambda: len(done) == 30)
        live.until_held(1)
        waits = seen.claim_waits()
        assert len(waits) >= 4 and waits[-1] == "30000" and set(waits[:-1]) == {"0"}, waits
    finally:
        w.stop()
    assert db.from_("jobs").count() == 0


@pytest.mark.parametrize("raised", [RuntimeError("boom"), RuntimeError()], ids=["message", "empty"])
def test_failures_are_logged_and_their_message_stored(
    kind: str, raised: Exception, live: Server, db: fenecdb.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """No on_error: a failed attempt is a warning of the fenecdb.worker
    logger, a dead letter an error; the job's error field holds the
    message alone (the type's name when it is empty)."""
    enqueue(db, 1)

    def body(row: fenecdb.Row) -> None:
        raise raised

    caplog.set_level(logging.WARNING, logger="fenecdb.worker")
    w = Running(kind, live.url, body, until_empty=True, max_attempts=2, backoff=lambda n: 0)
    w.join(20)
    (row,) = db.from_("jobs").rows()
    text = str(raised) or "RuntimeError"
    assert (row["error"], row["attempts"], row["run_at"], row["owner"]) == (text, 2, None, None)
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "fenecdb.worker"]
    assert logged == [
        (logging.WARNING, f"fenecdb worker: handler (job 1): {text}"),
        (logging.ERROR, f"fenecdb worker: dead_letter (job 1): {text}"),
    ]


def test_stop_from_inside_a_handler(kind: str, live: Server, db: fenecdb.Client) -> None:
    """A handler asks the worker to stop: the stop returns at once (no
    wait for the 30 s grace), the worker ends when the handler returns,
    the job is acked and nothing is left leased."""
    enqueue(db, 2)
    took: List[float] = []
    box: List[Running] = []

    def body(row: fenecdb.Row) -> None:
        until("the worker made", lambda: bool(box))
        t0 = time.monotonic()
        w = box[0]
        if kind == "threads":
            w.worker.stop()
        else:
            assert w.loop is not None
            asyncio.run_coroutine_threadsafe(w.worker.stop(), w.loop).result(5)
        took.append(time.monotonic() - t0)

    t0 = time.monotonic()
    box.append(Running(kind, live.url, body, concurrency=1))
    box[0].join(10)
    assert time.monotonic() - t0 < 5
    assert took and took[0] < 1
    rows = db.from_("jobs").rows()
    assert [(r["id"], r["owner"], r["attempts"]) for r in rows] == [(2, None, 0)]


def test_stop_awaited_inside_an_async_handler(live: Server, db: fenecdb.Client) -> None:
    """``await worker.stop()`` in the handler itself returns at once."""
    enqueue(db, 1)

    async def main() -> float:
        async with fenecdb.connect_async(live.url) as adb:
            worker: List[fenecdb.AsyncWorker] = []

            async def handler(row: fenecdb.Row) -> None:
                await worker[0].stop()

            worker.append(fenecdb.AsyncWorker(adb.from_("jobs"), handler))
            t0 = time.monotonic()
            await worker[0].run()
            return time.monotonic() - t0

    assert asyncio.run(main()) < 5
    assert db.from_("jobs").count() == 0


def test_run_until_empty(kind: str, live: Server, db: fenecdb.Client) -> None:
    """30 jobs ready and one due in an hour: run_until_empty runs the 30,
    sends their acks and returns; the later job is left as it was."""
    enqueue(db, 30)
    db.from_("jobs").insert({"payload": {}, "run_at": expr("now() + ?", 3_600_000), "attempts": 0})
    done: List[int] = []
    t0 = time.monotonic()
    w = Running(kind, live.url, lambda row: done.append(row["id"]), until_empty=True, concurrency=4)
    w.join(20)
    assert time.monotonic() - t0 < 10
    assert sorted(done) == list(range(1, 31))
    rows = db.from_("jobs").rows()
    assert [(r["id"], r["owner"], r["attempts"]) for r in rows] == [(31, None, 0)]


def test_deprecated_names_still_work(live: Server, db: fenecdb.Client) -> None:
    """``owner=`` and an ``on_error(error, doing)`` hook: each warns
    (DeprecationWarning) and works as before."""
    enqueue(db, 1)
    told: List[Any] = []

    def body(row: fenecdb.Row, cancel: threading.Event) -> None:
        raise ValueError("nope")

    with pytest.warns(DeprecationWarning, match="owner_prefix"):
        w = fenecdb.Worker(db.from_("jobs"), body, owner="old", max_attempts=1, on_error=lambda e: told.append(e))
    assert w.owner_prefix == "old"
    with pytest.warns(DeprecationWarning):
        assert w.owner == "old"
    with pytest.warns(DeprecationWarning, match="WorkerError"):
        w = fenecdb.Worker(db.from_("jobs"), body, max_attempts=1, on_error=lambda e, doing: told.append((e, doing)))
    w.run_until_empty()
    ((cause, doing),) = told
    assert isinstance(cause, ValueError) and doing == "dead_letter (job 1): nope"


class ForwardProxy(LoopbackServer):
    """An HTTP forward proxy on loopback (``connect(proxy=…)``): each request
    comes in absolute form, is recorded (its statement and ``X-Team``
    header) and sent on."""

    def __init__(self) -> None:
        self.seen: List[Dict[str, str]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                doc = json.loads(body) if body else {}
                with proxy.lock:
                    proxy.seen.append({"query": str(doc.get("query", "")), "team": self.headers.get("X-Team", "")})
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection", "proxy-connection")}
                r = httpx.request(self.command, self.path, content=body, headers=headers, timeout=60, trust_env=False)
                self.relay(r)

            do_GET = do_POST = forward

        super().__init__(Handler)


def _run_through(kind: str, live: Server, forward: "ForwardProxy", **connect: Any) -> List[Dict[str, Any]]:
    """Runs a worker of the kind until the queue is empty, its client made
    with ``connect``'s options, and returns what the proxy saw, having
    checked that every job ran and that claims and acks went through
    ``forward``."""
    done: List[int] = []
    try:
        if kind == "threads":
            with fenecdb.connect(live.url, **connect) as client:
                fenecdb.Worker(client.from_("jobs"), lambda row, cancel: done.append(row["id"])).run_until_empty()
        else:

            async def main() -> None:
                async with fenecdb.connect_async(live.url, **connect) as client:

                    async def handler(row: fenecdb.Row) -> None:
                        done.append(row["id"])

                    await fenecdb.AsyncWorker(client.from_("jobs"), handler).run_until_empty()

            asyncio.run(main())
    finally:
        forward.close()
    assert sorted(done) == [1, 2, 3, 4, 5]
    claims = [s for s in forward.seen if s["query"].startswith("set jobs {owner: $1")]
    acks = [s for s in forward.seen if s["query"].startswith("del jobs")]
    assert claims and acks, f"not through the proxy: {forward.seen}"
    return forward.seen


def test_both_workers_send_through_the_environments_proxy(
    kind: str, live: Server, db: fenecdb.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTP_PROXY`` in the environment, as httpx reads it: the worker's
    requests go through that proxy (a plain ``http://`` node's requests
    otherwise take the SDK's own streams, fenecdb/_streams.py)."""
    enqueue(db, 5)
    proxy = ForwardProxy()
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    _run_through(kind, live, proxy)


def test_both_workers_send_through_the_clients_proxy_and_headers(kind: str, live: Server, db: fenecdb.Client) -> None:
    """``connect(proxy=…, headers=…)``: every request of the worker — its
    claims (the threaded worker's go over a client of their own), acks
    and extensions — goes through the proxy with the headers."""
    enqueue(db, 5)
    proxy = ForwardProxy()
    seen = _run_through(kind, live, proxy, proxy=proxy.url, headers={"X-Team": "mail"})
    assert all(s["team"] == "mail" for s in seen), seen
    collections = [s for s in seen if s["query"] == ""]
    assert len(collections) == 1, f"GET /collections sent {len(collections)} times"
