"""``Worker``: the job loop of docs/workers.md on threads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional

import httpx

from ._builder import Raw, Statement
from ._async.client import AsyncClient
from ._calls import rows_of
from ._codec import Row
from ._errors import FenecError
from ._sync.client import Client, Collection
from ._worker import ABANDON_AFTER, Backoff, OnError, Options, Plan, is_fault, refusal_doing

Handler = Callable[[Row, threading.Event], Any]
"""Runs one job in a thread of the worker's pool. The event is set when
the handler is to give up — its lease was lost, or the worker's grace
period on stop ended; a thread cannot be stopped from outside, so a
handler that runs long checks it (``if cancel.is_set(): return``)."""


class _Run:
    """One job while its handler runs."""

    def __init__(self, row: Row, owner: str, next_at: float) -> None:
        self.row = row
        self.owner = owner
        self.next_at = next_at
        self.cancel = threading.Event()
        self.lost = False
        self.stopped = False
        self.abandoned = False
        self.extending = False


class _InThread(httpx.AsyncBaseTransport):
    """A client's blocking transport (its TLS, proxy, auth: whatever the
    user gave ``Client(transport=…)``) for the worker's asyncio claim
    client: each request runs it in a thread and is read whole there. A
    request given up (a held claim at stop) is left to end in its thread."""

    def __init__(self, transport: httpx.BaseTransport) -> None:
        self._transport = transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        sync = httpx.Request(request.method, request.url, headers=request.headers, content=body, extensions=request.extensions)

        def send() -> httpx.Response:
            response = self._transport.handle_request(sync)
            try:
                raw = b"".join(response.iter_raw())  # still encoded: the client decodes it
            finally:
                response.close()
            return httpx.Response(response.status_code, headers=response.headers, content=raw, extensions=response.extensions)

        return await asyncio.get_running_loop().run_in_executor(None, send)


class Worker:
    """Takes jobs from ``jobs`` and runs each with ``handler(row, cancel)``
    in a pool of ``concurrency`` threads until :meth:`stop`
    (docs/workers.md). Options as :class:`fenecdb.AsyncWorker`'s: ``lease``
    30 s extended every lease/2 (a lost lease sets ``cancel`` and sends
    neither ack nor fail), ``wait`` 30 s held claims, ``max_attempts`` 5,
    ``backoff`` exponential from 1 s capped at 1 h with full jitter,
    ``where``, ``owner``, ``grace`` 30 s, ``on_error``. Its claims go over
    a connection of its own (an :class:`AsyncClient` with the client's URLs,
    token, timeout and transport, on a thread of its own), so that
    :meth:`stop` can give a held claim up; the rest over the client's. With
    a ``transport`` of the client's own, a claim given up at stop stays held
    at the server until its ``wait`` ends (a blocking transport cannot be
    interrupted), and a job it takes then waits out its lease.

        worker = Worker(db.from_("jobs"), send_mail)
        worker.start()        # or worker.run() in this thread
        ...
        worker.stop()         # graceful: see stop()
    """

    def __init__(
        self,
        jobs: Collection,
        handler: Handler,
        *,
        concurrency: int = 10,
        lease: float = 30,
        wait: float = 30,
        max_attempts: int = 5,
        backoff: Optional[Backoff] = None,
        where: Optional[Raw] = None,
        owner: Optional[str] = None,
        grace: float = 30,
        on_error: Optional[OnError] = None,
    ) -> None:
        if not isinstance(jobs, Collection):
            raise TypeError(f"Worker takes a Client's collection (db.from_('jobs')), got {jobs!r}")
        self.options = Options.make(concurrency, lease, wait, max_attempts, backoff, where, owner, grace, on_error)
        self._plan = Plan(jobs, self.options)
        self._db: Client = jobs.db
        self._handler = handler
        self._cond = threading.Condition()
        self._in_flight = 0
        self._running: Dict[int, _Run] = {}
        self._stopping = threading.Event()
        self._deadline = 0.0
        self._started = False
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._claim: "Optional[concurrent.futures.Future[Any]]" = None

    @property
    def owner(self) -> str:
        """The owner prefix: each claim's owner is ``<owner>:<claim counter>``."""
        return self.options.owner

    def start(self) -> None:
        """Runs :meth:`run` in a thread of its own."""
        self._thread = threading.Thread(target=self.run, name=f"fenecdb-worker-{self.owner}", daemon=True)
        self._thread.start()

    def run(self) -> None:
        """Claims and runs jobs in this thread until :meth:`stop` has
        finished with them."""
        with self._cond:
            if self._started:
                raise RuntimeError("this worker has run already: make another")
            self._started = True
        pool = ThreadPoolExecutor(self.options.concurrency, thread_name_prefix=f"fenecdb-job-{self.owner}")
        keeper = threading.Thread(target=self._keep, name=f"fenecdb-lease-{self.owner}", daemon=True)
        keeper.start()
        # Held claims go over an asyncio client of their own, on a loop of
        # their own, because a blocking request cannot be given up from
        # another thread and stop() must not wait out a held claim.
        loop = asyncio.new_event_loop()
        claimer = threading.Thread(target=loop.run_forever, name=f"fenecdb-claim-{self.owner}", daemon=True)
        claimer.start()
        settings = self._db._settings
        made: List[AsyncClient] = []

        async def make() -> AsyncClient:
            # The client's whole configuration: its transport (TLS,
            # proxies, auth of the user's own) too.
            transport = None if self._db._transport is None else _InThread(self._db._transport)
            made.append(
                AsyncClient(
                    settings.nodes.urls, token=settings.token, timeout=settings.timeout, verify=self._db._ssl, transport=transport
                )
            )
            # The held claims' client follows the leader with this one:
            # they share the node sent to (docs/sdks.md, "Several nodes").
            made[0]._settings.nodes = settings.nodes
            return made[0]

        try:
            aclient = asyncio.run_coroutine_threadsafe(make(), loop).result()
            self._claim_loop(pool, aclient, loop)
            self._drain()
        finally:
            pool.shutdown(wait=False)
            with self._cond:
                self._done.set()
                self._cond.notify_all()
            keeper.join()
            if made:
                asyncio.run_coroutine_threadsafe(made[0].aclose(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            claimer.join()
            loop.close()

    def stop(self) -> None:
        """Stops gracefully: no new claims; jobs claimed but not started
        are released at once, so another worker takes them now; running
        handlers get ``grace`` seconds (30), then their ``cancel`` event is
        set and their jobs released (to run again). A held claim is given
        up at once, and any job the server took for it released. Returns when :meth:`run` has finished."""
        with self._cond:
            if not self._stopping.is_set():
                self._deadline = time.monotonic() + self.options.grace
                self._stopping.set()
                self._cond.notify_all()
            started = self._started
            claim = self._claim
        if claim is not None:
            claim.cancel()  # given up: the claim loop releases its jobs
        if started:
            self._done.wait()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _claim_loop(self, pool: ThreadPoolExecutor, aclient: AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        faults = 0
        while not self._stopping.is_set():
            with self._cond:
                while self._in_flight >= self.options.concurrency and not self._stopping.is_set():
                    self._cond.wait()
                free = self.options.concurrency - self._in_flight
            if self._stopping.is_set():
                break
            owner = self._plan.owner()
            stmt = self._plan.claim(owner, free)
            with self._cond:
                if self._stopping.is_set():
                    break
                self._claim = claim = asyncio.run_coroutine_threadsafe(aclient.query(stmt, wait=self.options.wait), loop)
            try:
                rows = rows_of(claim.result())
            except concurrent.futures.CancelledError:
                self._send(self._plan.release_claim(owner), "releasing a given-up claim's jobs")
                break
            except FenecError as e:
                faults += 1
                self.options.on_error(e, "claiming jobs")
                self._stopping.wait(self.options.backoff(faults))
                continue
            faults = 0
            for row in rows:
                if self._stopping.is_set():
                    self._send(self._plan.release(row, owner), "releasing a job on stop")
                    continue
                with self._cond:
                    self._in_flight += 1
                pool.submit(self._run, row, owner)

    def _drain(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._in_flight == 0, max(0.0, self._deadline - time.monotonic()))
            for run in self._running.values():
                run.stopped = True
                run.cancel.set()
            if not self._cond.wait_for(lambda: self._in_flight == 0, ABANDON_AFTER):
                # Handlers that do not heed ``cancel`` are given up: their
                # threads finish alone and send nothing; the leases lapse.
                for run in self._running.values():
                    run.abandoned = True

    def _run(self, row: Row, owner: str) -> None:
        run = _Run(row, owner, time.monotonic() + self.options.lease / 2)
        with self._cond:
            self._running[id(run)] = run
            self._cond.notify_all()
        try:
            error: Optional[BaseException] = None
            try:
                self._handler(row, run.cancel)
            except Exception as e:
                error = e
            with self._cond:
                del self._running[id(run)]
            if run.lost or run.abandoned:
                return
            if run.stopped:
                self._send(self._plan.release(row, owner), "releasing a job on stop")
            elif error is not None:
                self._send(self._plan.fail(row, owner, error), "failing a job")
            else:
                self._send(self._plan.ack(row, owner), "acking a job")
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def _keep(self) -> None:
        """Extends the running jobs' leases every lease/2, each extension in
        a thread of its own pool and bounded by lease/2, so one that hangs
        holds up no other job's; a refusal with ``unmet`` means a lease was
        lost: its handler's ``cancel`` is set."""
        every = self.options.lease / 2
        extenders = ThreadPoolExecutor(self.options.concurrency, thread_name_prefix=f"fenecdb-lease-{self.owner}")
        try:
            while True:
                with self._cond:
                    if self._done.is_set():
                        return
                    now = time.monotonic()
                    waiting = [r for r in self._running.values() if not r.lost and not r.extending]
                    due = [r for r in waiting if r.next_at <= now]
                    if not due:
                        soonest = min((r.next_at for r in waiting), default=now + every)
                        self._cond.wait(max(0.001, soonest - now))
                        continue
                    for run in due:
                        run.extending = True
                        run.next_at = now + every
                for run in due:
                    extenders.submit(self._extend, run, every)
        finally:
            extenders.shutdown(wait=False)  # a hung extension ends alone

    def _extend(self, run: _Run, every: float) -> None:
        try:
            self._db.query(self._plan.extend(run.row, run.owner), timeout=every)
        except FenecError as e:
            with self._cond:
                ended = id(run) not in self._running
            if ended:
                return  # it ended meanwhile: its ack or fail is what counts
            if e.code == "unmet":
                run.lost = True
                run.cancel.set()
                self.options.on_error(e, f"extending the lease of job {run.row.get('id')!r}: lost, its handler is cancelled")
            else:
                self.options.on_error(e, "extending a lease")  # the next tick tries again
        finally:
            with self._cond:
                run.extending = False
                self._cond.notify_all()

    def _send(self, stmt: Statement, doing: str) -> None:
        """Sends an ack, fail or release, retrying faults with backoff until
        it is answered, the lease is lost, or a stop's grace period is over."""
        faults = 0
        while True:
            try:
                self._db.query(stmt)
                return
            except FenecError as e:
                if not is_fault(e):
                    self.options.on_error(e, refusal_doing(e, doing))
                    return
                faults += 1
                self.options.on_error(e, doing)
                delay = self.options.backoff(faults)
                if self._stopping.is_set():
                    if time.monotonic() >= self._deadline:
                        return
                    delay = min(delay, self._deadline - time.monotonic())
                time.sleep(delay)
