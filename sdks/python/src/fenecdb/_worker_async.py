"""``AsyncWorker``: the job loop of docs/workers.md on asyncio tasks."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, Optional, Set

from ._async.client import AsyncClient, AsyncCollection
from ._builder import Raw, Statement
from ._calls import rows_of
from ._codec import Row
from ._errors import FenecError
from ._worker import ABANDON_AFTER, Backoff, OnError, Options, Plan, is_fault, refusal_doing

AsyncHandler = Callable[[Row], Awaitable[Any]]
"""Runs one job; cancelled (asyncio cancellation) when its lease is lost or
the worker's grace period on stop ends."""


class _Run:
    """One job while its handler runs."""

    lost = False
    stopped = False


class AsyncWorker:
    """Takes jobs from ``jobs`` and runs each with ``handler`` (an ``async``
    function of the row) until :meth:`stop` (docs/workers.md).

    Up to ``concurrency`` jobs (10) run at once, each under a lease of
    ``lease`` seconds (30), extended every ``lease``/2 while its handler
    runs; a lost lease (another worker may have the job) cancels the
    handler and sends neither ack nor fail. An idle worker holds one claim
    at the server (``wait``, 30 s) and sends no polls. A job whose handler
    raises is retried after ``backoff(attempts)`` seconds (exponential from
    1 s, capped at 1 h, full jitter), and after ``max_attempts`` (5) is left
    a dead letter (``run_at`` and ``owner`` null, ``error`` the handler's
    error). ``where`` (a :func:`raw` condition) narrows the claim to a queue
    of the collection; owners are ``<owner>:<claim counter>``.
    Faults (network, timeouts, 5xx) are retried with backoff and told to
    ``on_error(error, doing)``; the worker never dies of one.

        worker = AsyncWorker(db.from_("jobs"), send_mail, concurrency=10)
        task = asyncio.ensure_future(worker.run())
        ...
        await worker.stop()   # graceful: see stop()
    """

    def __init__(
        self,
        jobs: AsyncCollection,
        handler: AsyncHandler,
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
        if not isinstance(jobs, AsyncCollection):
            raise TypeError(f"AsyncWorker takes an AsyncClient's collection (db.from_('jobs')), got {jobs!r}")
        self.options = Options.make(concurrency, lease, wait, max_attempts, backoff, where, owner, grace, on_error)
        self._plan = Plan(jobs, self.options)
        self._db: AsyncClient = jobs.db
        self._handler = handler
        self._tasks: Set["asyncio.Future[None]"] = set()
        self._handlers: Dict["asyncio.Future[Any]", _Run] = {}
        self._claim: Optional["asyncio.Future[Any]"] = None
        self._stopping = False
        self._started = False
        self._deadline = 0.0
        self._wake: Optional[asyncio.Event] = None
        self._stopped: Optional[asyncio.Event] = None
        self._done: Optional[asyncio.Event] = None

    @property
    def owner(self) -> str:
        """The owner prefix: each claim's owner is ``<owner>:<claim counter>``."""
        return self.options.owner

    async def run(self) -> None:
        """Claims and runs jobs until :meth:`stop` has finished with them.
        Cancelling the task that runs it stops at once, without the grace
        period or releases: its jobs run again when their leases lapse."""
        if self._started:
            raise RuntimeError("this worker has run already: make another")
        self._started = True
        self._wake, self._stopped, self._done = asyncio.Event(), asyncio.Event(), asyncio.Event()
        try:
            await self._claim_loop()
            await self._drain()
        finally:
            for h in self._handlers:
                h.cancel()
            if self._claim is not None:
                self._claim.cancel()
            self._done.set()

    async def stop(self) -> None:
        """Stops gracefully: no new claims (a held claim is given up);
        jobs claimed but not started are released at once, so another
        worker takes them now; running handlers get ``grace`` seconds (30)
        and are then cancelled (their jobs released, to run again). Returns
        when :meth:`run` has finished."""
        if not self._stopping:
            self._stopping = True
            self._deadline = asyncio.get_running_loop().time() + self.options.grace
            if self._wake is None or self._stopped is None:
                return  # not running
            self._stopped.set()
            self._wake.set()
            if self._claim is not None:
                self._claim.cancel()  # given up: the claim loop releases its jobs
        if self._done is not None:
            await self._done.wait()

    async def _claim_loop(self) -> None:
        assert self._wake is not None
        faults = 0
        while not self._stopping:
            free = self.options.concurrency - len(self._tasks)
            if free <= 0:
                self._wake.clear()
                await self._wake.wait()
                continue
            owner = self._plan.owner()
            self._claim = claim = asyncio.ensure_future(self._db.query(self._plan.claim(owner, free), wait=self.options.wait))
            await asyncio.wait({claim})
            if claim.cancelled():
                await self._send(self._plan.release_claim(owner), "releasing a given-up claim's jobs")
                break
            error = claim.exception()
            if error is not None:
                if not isinstance(error, FenecError):
                    raise error
                faults += 1
                self.options.on_error(error, "claiming jobs")
                await self._pause(self.options.backoff(faults))
                continue
            faults = 0
            for row in rows_of(claim.result()):
                work = self._release(row, owner) if self._stopping else self._run(row, owner)
                task = asyncio.ensure_future(work)
                self._tasks.add(task)
                task.add_done_callback(self._finished)

    def _finished(self, task: "asyncio.Future[None]") -> None:
        self._tasks.discard(task)
        if self._wake is not None:
            self._wake.set()

    async def _pause(self, seconds: float) -> None:
        """Sleeps, unless the worker stops first."""
        assert self._stopped is not None
        try:
            await asyncio.wait_for(self._stopped.wait(), max(0.0, seconds))
        except asyncio.TimeoutError:
            pass

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=max(0.0, self._deadline - loop.time()))
        for handler, run in list(self._handlers.items()):
            run.stopped = True
            handler.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=ABANDON_AFTER)
        # A handler that will not end (it swallows its cancellation) is
        # given up: nothing is sent for its job, whose lease lapses.
        for task in list(self._tasks):
            task.cancel()
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def _run(self, row: Row, owner: str) -> None:
        run = _Run()
        handler = asyncio.ensure_future(self._handler(row))
        self._handlers[handler] = run
        keeper = asyncio.ensure_future(self._keep(row, owner, handler, run))
        try:
            await asyncio.wait({handler})
        finally:
            keeper.cancel()
            self._handlers.pop(handler, None)
        if run.lost:
            return
        if run.stopped:
            await self._send(self._plan.release(row, owner), "releasing a job on stop")
        elif handler.cancelled():
            await self._send(self._plan.fail(row, owner, asyncio.CancelledError("the handler was cancelled")), "failing a job")
        elif handler.exception() is not None:
            error = handler.exception()
            assert error is not None
            await self._send(self._plan.fail(row, owner, error), "failing a job")
        else:
            await self._send(self._plan.ack(row, owner), "acking a job")

    async def _keep(self, row: Row, owner: str, handler: "asyncio.Future[Any]", run: _Run) -> None:
        """Extends the lease every lease/2 while the handler runs; a refusal
        with ``unmet`` means it was lost: the handler is cancelled. Any
        other failure is reported, and the next tick tries again."""
        every = self.options.lease / 2
        while True:
            await asyncio.sleep(every)
            try:
                await self._db.query(self._plan.extend(row, owner))
            except FenecError as e:
                if e.code == "unmet":
                    run.lost = True
                    handler.cancel()
                    self.options.on_error(e, f"extending the lease of job {row.get('id')!r}: lost, its handler is cancelled")
                    return
                self.options.on_error(e, "extending a lease")  # the next tick tries again

    async def _release(self, row: Row, owner: str) -> None:
        await self._send(self._plan.release(row, owner), "releasing a job on stop")

    async def _send(self, stmt: Statement, doing: str) -> None:
        """Sends an ack, fail or release, retrying faults with backoff until
        it is answered, the lease is lost, or a stop's grace period is over."""
        loop = asyncio.get_running_loop()
        faults = 0
        while True:
            try:
                await self._db.query(stmt)
                return
            except FenecError as e:
                if not is_fault(e):
                    self.options.on_error(e, refusal_doing(e, doing))
                    return
                faults += 1
                self.options.on_error(e, doing)
                delay = self.options.backoff(faults)
                if self._stopping:
                    if loop.time() >= self._deadline:
                        return
                    delay = min(delay, self._deadline - loop.time())
                await asyncio.sleep(delay)
