"""``Worker`` (threads) and ``AsyncWorker`` (asyncio) against a real
``fenec serve`` on the system clock (docs/workers.md): 1 000 jobs through
two workers with seeded failures, a slow handler extended, a lost lease,
stop under load, and the server stopped for 2 s mid-run. Each test runs
for both kinds through one harness, so both keep one behaviour."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import fenecdb
from fenecdb import expr

from .conftest import JOBS, Server, StartServer

KINDS = ["threads", "asyncio"]


def fast_backoff(n: int) -> float:
    """Retries within the test's time: 20 ms, 40 ms, … capped at 200 ms."""
    return min(0.2, 0.02 * n)


def seeded_failure(job_id: int, attempt: int) -> bool:
    """10 % of the attempts fail, the same ones every run."""
    return random.Random(f"{job_id}:{attempt}").random() < 0.1


class Log:
    """What the handlers did, from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: List[Tuple[int, str, float]] = []  # job id, worker, when
        self.succeeded: Counter[int] = Counter()
        self.failed: Counter[int] = Counter()
        self.cancelled: List[int] = []
        self.errors: List[Tuple[BaseException, str]] = []

    def on_error(self, error: fenecdb.WorkerError) -> None:
        with self.lock:
            self.errors.append((error.cause, error.step))

    def starts(self, job_id: int) -> List[Tuple[int, str, float]]:
        with self.lock:
            return [s for s in self.started if s[0] == job_id]


def behave(log: Log, name: str, row: fenecdb.Row) -> Tuple[float, bool]:
    """Records the start; answers how long to take and whether to fail."""
    with log.lock:
        log.started.append((row["id"], name, time.monotonic()))
    payload = row["payload"] or {}
    fail = payload.get("always_fail", False) or (payload.get("seeded") and seeded_failure(row["id"], row["attempts"]))
    return float(payload.get("sleep", 0)), bool(fail)


def done(log: Log, row: fenecdb.Row, fail: bool) -> None:
    with log.lock:
        (log.failed if fail else log.succeeded)[row["id"]] += 1
    if fail:
        raise RuntimeError(f"job {row['id']} failed on attempt {row['attempts']}")


class Workers:
    """Workers of one kind on one server, each with its own client, run
    in background threads (asyncio: one event loop in a thread)."""

    def __init__(self, kind: str, url: str, log: Log, **options: Any) -> None:
        self.kind, self.url, self.log, self.options = kind, url, log, options
        self.sync: List[fenecdb.Worker] = []
        self.clients: List[fenecdb.Client] = []
        self.aworkers: List[fenecdb.AsyncWorker] = []
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.thread: Optional[threading.Thread] = None
        if kind == "asyncio":
            ready = threading.Event()

            def loop_thread() -> None:
                self.loop = asyncio.new_event_loop()
                self.loop.call_soon(ready.set)
                self.loop.run_forever()
                self.loop.close()

            self.thread = threading.Thread(target=loop_thread, daemon=True)
            self.thread.start()
            ready.wait()

    def add(self, name: str, **options: Any) -> str:
        opts = {"backoff": fast_backoff, "on_error": self.log.on_error, **self.options, **options}
        log = self.log
        if self.kind == "threads":
            db = fenecdb.connect(self.url, timeout=5)
            self.clients.append(db)

            def handler(row: fenecdb.Row, cancel: threading.Event) -> None:
                sleep, fail = behave(log, name, row)
                if cancel.wait(sleep):
                    with log.lock:
                        log.cancelled.append(row["id"])
                    raise RuntimeError("cancelled")
                done(log, row, fail)

            w = fenecdb.Worker(db.from_("jobs"), handler, owner_prefix=name, **opts)
            self.sync.append(w)
            w.start()
            return name

        async def ahandler(row: fenecdb.Row) -> None:
            sleep, fail = behave(log, name, row)
            try:
                await asyncio.sleep(sleep)
            except asyncio.CancelledError:
                with log.lock:
                    log.cancelled.append(row["id"])
                raise
            done(log, row, fail)

        async def make() -> None:
            adb = fenecdb.connect_async(self.url, timeout=5)
            w = fenecdb.AsyncWorker(adb.from_("jobs"), ahandler, owner_prefix=name, **opts)
            self.aworkers.append(w)
            asyncio.ensure_future(w.run())

        self.call(make())
        return name

    def call(self, coro: Any) -> Any:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def stop(self, i: int) -> None:
        if self.kind == "threads":
            self.sync[i].stop()
        else:
            w = self.aworkers[i]
            self.call(w.stop())
            self.call(w._db.aclose())

    def stop_all(self) -> None:
        for i in range(len(self.sync) or len(self.aworkers)):
            self.stop(i)
        for c in self.clients:
            c.close()
        if self.loop is not None and self.thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def live(start_server: StartServer) -> Server:
    """A server on the system clock: leases lapse in real time."""
    return start_server("--clock", "system")


@pytest.fixture
def db(live: Server) -> Iterator[fenecdb.Client]:
    with fenecdb.connect(live.url) as client:
        client.query(JOBS)
        yield client


def enqueue(db: fenecdb.Client, payloads: List[Dict[str, Any]]) -> None:
    jobs = db.from_("jobs")
    for i in range(0, len(payloads), 100):
        jobs.insert([{"payload": p, "run_at": expr("now()"), "attempts": 0} for p in payloads[i : i + 100]])


def until(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        time.sleep(0.02)


def pending(db: fenecdb.Client) -> int:
    """Jobs not yet acked nor dead letters."""
    return db.from_("jobs").where(fenecdb.raw("run_at is not null")).count()


def test_thousand_jobs_two_workers_seeded_failures(kind: str, live: Server, db: fenecdb.Client) -> None:
    enqueue(db, [{"seeded": True} for _ in range(999)] + [{"always_fail": True}])
    log = Log()
    workers = Workers(kind, live.url, log, concurrency=8)
    try:
        workers.add("a")
        workers.add("b")
        until("drained", lambda: pending(db) == 0, 60)
    finally:
        workers.stop_all()
    dead_ids = {i for i in range(1, 1000) if all(seeded_failure(i, a) for a in range(1, 6))} | {1000}
    assert set(log.succeeded) == set(range(1, 1001)) - dead_ids
    assert max(log.succeeded.values()) == 1, "a job's handler succeeded twice"
    dead = db.from_("jobs").order("id").rows()
    assert [r["id"] for r in dead] == sorted(dead_ids)
    for r in dead:
        assert (r["attempts"], r["owner"], r["run_at"]) == (5, None, None)
        assert r["error"].startswith("job ")  # the message alone
    assert log.failed[1000] == 5
    assert sum(log.failed.values()) > 50  # the seeded 10 % ran and were retried
    assert db.from_("jobs").where(fenecdb.raw("owner is not null")).count() == 0
    assert {w for _, w, _ in log.started} == {"a", "b"}
    assert not [e for e in log.errors if "lost" in e[1]]


def test_slow_handler_extended_and_run_once(kind: str, live: Server, db: fenecdb.Client) -> None:
    enqueue(db, [{"sleep": 2.5}])
    log = Log()
    workers = Workers(kind, live.url, log, lease=1, wait=1)
    try:
        workers.add("a")
        workers.add("b")
        until("run", lambda: db.from_("jobs").count() == 0, 10)
    finally:
        workers.stop_all()
    assert len(log.starts(1)) == 1, f"run by more than one worker: {log.started}"
    assert log.succeeded[1] == 1 and not log.cancelled and not log.errors


def test_lost_lease_cancels_and_sends_nothing(kind: str, live: Server, db: fenecdb.Client) -> None:
    enqueue(db, [{"sleep": 10}])
    log = Log()
    workers = Workers(kind, live.url, log, lease=1, wait=1)
    try:
        workers.add("a")
        until("started", lambda: bool(log.starts(1)), 5)
        # Another takes the job over: the next extension is refused.
        db.from_("jobs").where("id", 1).update({"owner": "thief", "run_at": expr("now() + ?", 60000)})
        until("cancelled", lambda: log.cancelled == [1], 5)
        time.sleep(0.5)  # an ack or fail, if one were sent, would be in by now
        (row,) = db.from_("jobs").rows()
    finally:
        workers.stop_all()
    assert (row["owner"], row["error"], row["attempts"]) == ("thief", None, 1)
    assert not log.succeeded and not log.failed
    assert [d for _, d in log.errors if "lost" in d]


def test_stop_under_load(kind: str, live: Server, db: fenecdb.Client) -> None:
    enqueue(db, [{"sleep": 0.05} for _ in range(300)])
    log = Log()
    workers = Workers(kind, live.url, log, concurrency=8)  # lease 30 s: a job left leased would wait 30 s
    try:
        workers.add("a")
        workers.add("b")
        until("started", lambda: len(log.started) >= 40, 10)
        t0 = time.monotonic()
        workers.stop(0)
        stopped = time.monotonic()
        # a's jobs are acked, failed or released by now: none waits out a's lease.
        owners = {r["owner"].split(":")[0] for r in db.from_("jobs").where(fenecdb.raw("owner is not null")).rows()}
        assert owners <= {"b"}, f"left leased by a: {owners}"
        until("drained by b", lambda: pending(db) == 0, 25)
        drained = time.monotonic()
    finally:
        workers.stop_all()
    a_jobs = {j for j, w, _ in log.started if w == "a"}
    assert a_jobs and all(log.succeeded[j] == 1 for j in a_jobs), "a's running handlers did not finish"
    assert not log.cancelled
    assert stopped - t0 < 5  # a's handlers take 50 ms; the grace is 30 s
    assert drained - stopped < 20  # nothing waited out a's 30 s lease
    assert max(log.succeeded.values()) == 1 and len(log.succeeded) == 300
    assert not [j for j, w, t in log.started if w == "a" and t > stopped]


def test_stop_gives_a_held_claim_up(kind: str, live: Server, db: fenecdb.Client) -> None:
    """An idle worker holds one claim (no polls); stop() gives it up at once
    rather than waiting out its 30 s, and the server drops it."""
    log = Log()
    workers = Workers(kind, live.url, log)
    try:
        workers.add("a")
        until("a's claim held", lambda: live.held_claims() == 1, 5)
        time.sleep(0.3)
        assert live.held_claims() == 1  # still the one claim: no polls
        t0 = time.monotonic()
        workers.stop(0)
        assert time.monotonic() - t0 < 1
        until("the claim dropped at the server", lambda: live.held_claims() == 0, 2)
        enqueue(db, [{"sleep": 0}])
        time.sleep(0.2)
        assert db.from_("jobs").first() is not None and not log.started  # taken by no one
    finally:
        workers.stop_all()


def test_server_stopped_two_seconds(kind: str, start_server: StartServer, tmp_path: Any) -> None:
    path = str(tmp_path / "jobs.db")
    server = start_server("--clock", "system", "--file", path)
    with fenecdb.connect(server.url) as db:
        db.query(JOBS)
        enqueue(db, [{"sleep": 0.01} for _ in range(400)])
    log = Log()
    workers = Workers(kind, server.url, log, concurrency=8, lease=2)
    try:
        workers.add("a")
        workers.add("b")
        until("started", lambda: len(log.started) >= 50, 10)
        server.stop()
        time.sleep(2)
        server = start_server("--clock", "system", "--file", path, "--http", server.url.removeprefix("http://"))
        with fenecdb.connect(server.url) as db:
            until("drained", lambda: pending(db) == 0, 30)
            left = db.from_("jobs").count()
    finally:
        workers.stop_all()
    assert left == 0
    assert set(log.succeeded) == set(range(1, 401))  # nothing lost; at least once
    assert any(isinstance(e, fenecdb.NetworkError) for e, _ in log.errors)


def test_throughput(kind: str, live: Server, db: fenecdb.Client, capsys: pytest.CaptureFixture[str]) -> None:
    """Jobs/s through one worker of concurrency 10 with an empty handler
    (FENEC_WORKER_JOBS jobs, 1 000 by default); printed, not asserted:
    ``pytest -s -k throughput`` shows it."""
    n = int(os.environ.get("FENEC_WORKER_JOBS", "1000"))
    enqueue(db, [{} for _ in range(n)])
    log = Log()
    workers = Workers(kind, live.url, log, concurrency=10)
    try:
        started = time.monotonic()
        workers.add("a")
        until("drained", lambda: db.from_("jobs").count() == 0, 120)
        took = time.monotonic() - started
    finally:
        workers.stop_all()
    assert len(log.succeeded) == n and not log.errors
    with capsys.disabled():
        print(f"\n{kind}: {n} jobs in {took:.2f} s: {n / took:.0f} jobs/s through one worker of concurrency 10")


def test_worker_started_before_its_collection(kind: str, live: Server) -> None:
    """A claim refused with a 4xx (no such collection yet) is reported and
    retried: the worker starts working when the collection is made."""
    log = Log()
    workers = Workers(kind, live.url, log, wait=1)
    try:
        workers.add("a")
        until("the refusal reported", lambda: any(isinstance(e, fenecdb.NotFound) for e, _ in log.errors), 5)
        with fenecdb.connect(live.url) as db:
            db.query(JOBS)
            enqueue(db, [{} for _ in range(5)])
            until("run", lambda: db.from_("jobs").count() == 0, 10)
    finally:
        workers.stop_all()
    assert sorted(log.succeeded) == [1, 2, 3, 4, 5]


def test_stop_after_grace_cancels_and_releases(kind: str, live: Server, db: fenecdb.Client) -> None:
    """A handler still running when the grace period ends is cancelled and
    its job released (owner null, ready now, the run not counted)."""
    enqueue(db, [{"sleep": 10}])
    log = Log()
    workers = Workers(kind, live.url, log, grace=0.5)
    try:
        workers.add("a")
        until("started", lambda: bool(log.starts(1)), 5)
        t0 = time.monotonic()
        workers.stop(0)
        took = time.monotonic() - t0
        (row,) = db.from_("jobs").rows()
    finally:
        workers.stop_all()
    assert 0.4 < took < 5
    assert log.cancelled == [1] and not log.succeeded and not log.failed
    assert (row["owner"], row["attempts"], row["error"]) == (None, 0, None)
    assert row["run_at"] <= datetime.now(timezone.utc)


def test_released_jobs_taken_by_another_worker_within_200ms(kind: str, live: Server, db: fenecdb.Client) -> None:
    """Jobs a stopped worker releases (its handlers cancelled when the grace
    period ends) go back at once: another worker, idle on a held claim,
    takes them within 200 ms of the stop, not after their 30 s lease (as
    the Go, Kotlin and JS workers' tests check)."""
    enqueue(db, [{"sleep": 10}, {"sleep": 10}])
    log = Log()
    workers = Workers(kind, live.url, log, grace=0.3)
    try:
        workers.add("a", concurrency=2)  # both slots busy: a holds no claim
        until("a started both jobs", lambda: len(log.started) == 2, 5)
        workers.add("b")
        until("b's claim held", lambda: live.held_claims() == 1, 5)
        workers.stop(0)
        stopped = time.monotonic()
        until("b started both jobs", lambda: len([s for s in log.started if s[1] == "b"]) == 2, 5)
        taken = max(t for _, w, t in log.started if w == "b") - stopped
    finally:
        workers.stop_all()
    assert sorted(log.cancelled) == [1, 1, 2, 2], "each handler cancelled at its worker's stop (a's, then b's)"
    assert taken < 0.2, f"the released jobs were taken {taken * 1000:.0f} ms after the stop"


def test_stop_gives_up_a_handler_that_will_not_end(live: Server, db: fenecdb.Client) -> None:
    """A handler that ignores its cancellation does not hold stop() past
    the grace period (and a second): its job is given up, nothing is sent
    for it, and its lease lapses."""
    enqueue(db, [{}, {}])
    release = threading.Event()
    started = threading.Semaphore(0)

    def stubborn(row: fenecdb.Row, cancel: threading.Event) -> None:
        started.release()
        release.wait(30)  # ignores cancel

    async def astubborn(row: fenecdb.Row) -> None:
        started.release()
        while not release.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                pass  # swallowed

    w = fenecdb.Worker(db.from_("jobs"), stubborn, grace=0.3, lease=60, where=fenecdb.raw("id = ?", 1))
    w.start()
    assert started.acquire(timeout=5)
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < 3

    async def run_async() -> float:
        async with fenecdb.connect_async(live.url) as adb:
            aw = fenecdb.AsyncWorker(adb.from_("jobs"), astubborn, grace=0.3, lease=60)
            task = asyncio.ensure_future(aw.run())
            while not started.acquire(blocking=False):
                await asyncio.sleep(0.01)
            t1 = time.monotonic()
            await aw.stop()
            await task
            took = time.monotonic() - t1
            release.set()  # the given-up task ends: the loop can close
            return took

    try:
        assert asyncio.run(run_async()) < 3
    finally:
        release.set()
    rows = db.from_("jobs").order("id").rows()
    assert [(r["owner"] or "").split(":")[0] != "" for r in rows] == [True, True]  # still leased: given up
    assert all(r["error"] is None for r in rows)
