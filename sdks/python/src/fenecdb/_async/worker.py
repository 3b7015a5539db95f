"""``AsyncWorker``: the job loop of docs/workers.md on asyncio. Written
once: the threaded ``Worker`` (``fenecdb/_sync/worker.py``) is generated
from this file by unasync (``make generate``), against the same names of
``_runtime.py`` on threads; what both share is in ``fenecdb/_worker.py``."""

from __future__ import annotations

import contextvars
import logging
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from .._builder import Raw, Statement
from .._calls import rows_of
from .._codec import Row
from .._errors import FenecError
from .._worker import (
    ABANDON_AFTER,
    ACK_BATCH,
    ACK_WINDOW,
    Backoff,
    LostLease,
    Options,
    Plan,
    WorkerError,
    ids_of,
    is_fault,
)
from . import _runtime as rt
from ._runtime import AsyncHandler
from .client import AsyncCollection

_HANDLING: "contextvars.ContextVar[Optional[object]]" = contextvars.ContextVar("fenecdb_worker_handling", default=None)
"""The worker whose handler runs in this task (or thread): a stop asked
from inside a handler only asks, and does not wait for itself."""


class _Run:
    """One job while its handler runs."""

    __slots__ = ("row", "owner", "job", "next_at", "lost", "stopped", "abandoned", "extending")

    def __init__(self, row: Row, owner: str, job: rt.Job, next_at: float) -> None:
        self.row = row
        self.owner = owner
        self.job = job
        self.next_at = next_at
        self.lost = False
        self.stopped = False
        self.abandoned = False
        self.extending = False


Batch = Dict[str, List[_Run]]
"""Jobs to ack, by claim owner."""


class AsyncWorker:
    """Takes jobs from ``jobs`` and runs each with ``handler`` until
    :meth:`stop`, or with :meth:`run_until_empty` until no job is ready
    (docs/workers.md).

    Up to ``concurrency`` jobs (10) run at once, each under a lease of
    ``lease`` seconds (30, at least 0.1), extended every ``lease``/2 while
    its handler runs; a lost lease (another worker may have the job)
    cancels the handler and sends neither ack nor fail. One claim at a
    time, for every free slot, once half the slots are free (or none
    runs); once a claim finds nothing, the next is held at the server up
    to ``wait`` seconds (30): an idle worker sends no polls. Jobs done
    within 5 ms are acked together — in the request of the next claim
    when that claim is sent, not held, as the last running handler
    returns. A job whose handler raises is retried after
    ``backoff(attempts)`` seconds
    (exponential from 1 s, capped at 1 h, full jitter), and after
    ``max_attempts`` (5) is left a dead letter (``run_at`` and ``owner``
    null, ``error`` the handler's error's message). ``where`` (a
    :func:`raw` condition) narrows the claim to a queue of the collection;
    each claim's owner is ``<owner_prefix>:<claim counter>``. Faults
    (network, timeouts, 5xx) are retried with backoff; every fault, failed
    attempt, dead letter and lost lease is told to ``on_error`` as one
    :class:`WorkerError` — by default the ``fenecdb.worker`` logger's
    warning (an error for a dead letter or a lost lease). The worker never
    dies of a fault.

        worker = AsyncWorker(db.from_("jobs"), send_mail, concurrency=10)
        worker.start()        # or: await worker.run()
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
        owner_prefix: Optional[str] = None,
        grace: float = 30,
        on_error: Optional[Callable[..., None]] = None,
        owner: Optional[str] = None,
    ) -> None:
        if not isinstance(jobs, AsyncCollection):
            raise TypeError(f"AsyncWorker takes its client's collection (db.from_('jobs')), got {jobs!r}")
        self.options = Options.make(
            concurrency, lease, wait, max_attempts, backoff, where, owner_prefix, grace, on_error, owner
        )
        self._plan = Plan(jobs, self.options)
        self._db = jobs.db
        self._handler = handler
        self._lock = rt.Lock()
        self._running: Dict[int, _Run] = {}
        self._in_flight = 0
        self._handling = 0  # jobs claimed whose handlers have not returned
        self._flushing = 0  # batches of acks taken and not yet handed to a send
        self._claiming = False  # a claim is in flight: sent, its rows not yet counted
        self._carry = False  # the batch of acks waits for the next claim, to go with it
        self._half = (self.options.concurrency + 1) // 2  # free slots a claim waits for
        self._until_empty = False
        self._finished = 0
        self._stopping = False
        self._started = False
        self._ended = False
        self._deadline = 0.0
        self._acks: Batch = {}
        self._ack_count = 0
        self._ack_due = 0.0
        self._ack_wait = ACK_WINDOW
        self._ack_timer_idle = False
        self._claims = rt.Claims(self._db)
        self._background: Any = None

    @property
    def owner_prefix(self) -> str:
        """Each claim's owner is ``<owner_prefix>:<claim counter>``."""
        return self.options.owner_prefix

    @property
    def owner(self) -> str:
        """Deprecated: :attr:`owner_prefix`."""
        warnings.warn("owner is deprecated: the name is owner_prefix", DeprecationWarning, stacklevel=2)
        return self.options.owner_prefix

    def start(self) -> None:
        """Runs :meth:`run` in the background."""
        self._background = rt.background(self.run)

    async def run(self) -> None:
        """Claims and runs jobs until :meth:`stop` has finished with them."""
        await self._work_loop(until_empty=False)

    async def run_until_empty(self) -> None:
        """Runs as :meth:`run`, and stops — its acks sent — once a claim
        finds no ready job while no handler runs (jobs whose ``run_at``
        is later are left). For scripts and tests."""
        await self._work_loop(until_empty=True)

    async def stop(self) -> None:
        """Stops gracefully: no new claims (a held claim is given up at
        once, and any job the server took for it released); running
        handlers may finish — for ``grace`` seconds (30) at most, then they
        are cancelled and their jobs released, to run again; the jobs done
        are acked. Returns when :meth:`run` has finished — or at once when
        asked from inside a handler, which the worker then waits for."""
        with self._lock:
            first = not self._stopping
            if first:
                self._stopping = True
                self._deadline = rt.now() + self.options.grace
            started = self._started
        if not started:
            return
        if first:
            self._claims.give_up()
            self._wake.set()
            self._stopped.set()
        if _HANDLING.get() is self:
            return
        await self._done.wait()

    async def _work_loop(self, until_empty: bool) -> None:
        self._wake, self._stopped, self._done = rt.Event(), rt.Event(), rt.Event()
        self._keep_wake, self._ack_wake = rt.Event(), rt.Event()
        with self._lock:
            if self._started:
                raise RuntimeError("this worker has run already: make another")
            self._started = True
            self._until_empty = until_empty
        name = f"fenecdb-{self.options.owner_prefix}"
        self._jobs = rt.Group(f"{name}-job", self.options.concurrency)
        self._sends = rt.Group(f"{name}-send", self.options.concurrency)
        self._extensions = rt.Group(f"{name}-lease")
        keeper = rt.Group(f"{name}-keeper")
        keeper.spawn(self._keep)
        keeper.spawn(self._ack_timer)
        drained = False
        try:
            await self._claim_loop(until_empty)
            await self._drain()
            drained = True
        finally:
            with self._lock:
                self._stopping = True
                self._ended = True
                running = list(self._running.values())
            if not drained:  # run itself cancelled: handlers stop, no grace
                for run in running:
                    run.job.cancel()
            self._keep_wake.set()
            self._ack_wake.set()
            await keeper.join(1)
            for group in (self._jobs, self._sends, self._extensions, keeper):
                group.close()
            await self._claims.end()
            self._done.set()

    async def _claim_loop(self, until_empty: bool) -> None:
        faults = 0
        half = self._half
        seen = -1  # finished handlers when a claim found nothing (run_until_empty)
        while True:
            with self._lock:
                if self._stopping:
                    return
                free = self.options.concurrency - self._in_flight
                ready = self._in_flight == 0 or free >= half
                if until_empty and seen == self._finished:
                    if self._in_flight == 0:
                        return  # nothing ready, nothing running: empty
                    ready = False  # claim again once a handler has ended
                if not ready:
                    self._wake.clear()
                self._claiming = ready
                carried = self._take_acks() if ready and self._carry else None
                self._carry = False
                sent_at = self._finished
            if not ready:
                await self._wake.wait()
                continue
            owner = self._plan.owner()
            claim = self._plan.claim(owner, free)
            try:
                if carried:
                    rows = await self._claim_with_acks(claim, carried)
                else:
                    rows = rows_of(await self._claims.take(claim, 0 if until_empty else self.options.wait))
            except rt.GivenUp:
                await self._send(self._plan.release_claim(owner), "release", None)
                return
            except FenecError as e:
                faults += 1
                self._report("claim", None, e)
                await self._stopped.wait(self.options.backoff(faults))
                continue
            faults = 0
            if until_empty and not rows:
                seen = sent_at
            with self._lock:
                stopping = self._stopping
                if not stopping:  # all counted before any starts: none acks alone
                    self._in_flight += len(rows)
                    self._handling += len(rows)
                self._claiming = False
            for row in rows:
                if stopping:  # claimed after the stop: given back at once
                    self._sends.spawn(self._send, self._plan.release(row, owner), "release", row.get("id"))
                else:
                    self._jobs.spawn(self._work, row, owner)

    async def _work(self, row: Row, owner: str) -> None:
        """Runs one job's handler, then acks, fails or releases it."""
        token: "Optional[contextvars.Token[Optional[object]]]" = _HANDLING.set(self)
        handled = False
        acks: Optional[Batch] = None
        try:
            run = _Run(row, owner, rt.Job(self._handler, row), rt.now() + self.options.lease / 2)
            with self._lock:
                self._running[id(run)] = run  # the keeper wakes in time: see _keep
            error = await run.job.outcome()
            with self._lock:
                self._running.pop(id(run), None)
                self._handling -= 1
                handled = True
            if token is not None:
                _HANDLING.reset(token)
                token = None
            if run.lost or run.abandoned:
                return
            if run.stopped:
                await self._send(self._plan.release(row, owner), "release", row.get("id"))
            elif error is None:
                acks = self._ack(run)
            else:
                dead = self._plan.dead(row)
                self._report("dead_letter" if dead else "handler", row.get("id"), error)
                await self._send(self._plan.fail(row, owner, error), "fail", row.get("id"))
        finally:
            if token is not None:
                _HANDLING.reset(token)
            with self._lock:
                self._in_flight -= 1
                self._finished += 1
                if not handled:
                    self._handling -= 1
                # The claim loop waits for half the slots free, or none in
                # flight (or, until empty, any handler's end): woken only
                # then, not by every job.
                wake = (
                    self._in_flight == 0
                    or self.options.concurrency - self._in_flight == self._half
                    or self._until_empty
                    or self._stopping
                )
                if acks:
                    self._flushing += 1  # a stop's drain waits for it: see _until_idle
            if wake:
                self._wake.set()
        if acks:
            # Handed over after the claim loop is woken: the next claim,
            # which the next jobs wait for, leaves first.
            self._sends.spawn(self._send_acks, acks)
            with self._lock:
                self._flushing -= 1
                wake = self._stopping
            if wake:
                self._wake.set()

    def _ack(self, run: _Run) -> Optional[Batch]:
        """Adds a job to the batch of acks, sent 5 ms after its first job,
        once it holds 100, or at once when no handler is running: no job
        can join it before the next claim answers. Returns the batch to
        send now (full, or no handler running), else ``None``."""
        with self._lock:
            self._acks.setdefault(run.owner, []).append(run)
            self._ack_count += 1
            batch = self._take_acks() if self._ack_count >= ACK_BATCH or self._handling == 0 else None
            if batch and self._carries():
                # The claim loop claims as soon as this job's slot is free,
                # not held: the acks go in that request (docs/workers.md).
                self._acks, self._ack_count, self._carry = batch, sum(len(r) for r in batch.values()), True
                batch = None
            first = batch is None and self._ack_count == 1
            if first:
                self._ack_due = rt.now() + self._ack_wait
            # A timer asleep until an earlier batch's time wakes before this
            # one's anyway: only an idle one is woken.
            wake = first and self._ack_timer_idle
            if wake:
                self._ack_timer_idle = False
        if wake:
            self._ack_wake.set()
        return batch

    def _carries(self) -> bool:
        """Under the lock, as a job that ran ends: whether the claim loop,
        with no claim in flight (waiting, or about to look at the slots
        again), claims once this job's slot is free (half the slots free,
        or none in flight), with a claim not held — so the acks that
        closed their window may go in the same request. (Waiting alone is
        not enough: a handler quicker than the loop's own turn from one
        claim's answer to its wait would ack alone.)"""
        free = self.options.concurrency - self._in_flight + 1
        return (
            not self._claiming
            and not self._stopping
            and not self._until_empty
            and (self._in_flight == 1 or free >= self._half)
            and self._claims.busy()
        )

    def _take_acks(self) -> Batch:
        """The batch to send now, and an empty one begun (under the lock)."""
        batch, self._acks, self._ack_count = self._acks, {}, 0
        return batch

    async def _ack_timer(self) -> None:
        """Sends a batch of acks once its window has passed (one loop for
        the worker's run, not a timer per batch)."""
        while True:
            with self._lock:
                if self._ended:
                    return
                batch: Optional[Batch] = None
                due: Optional[float] = None
                if self._ack_count:
                    if rt.now() >= self._ack_due:
                        batch = self._take_acks()
                    else:
                        due = self._ack_due
                if batch is None:
                    self._ack_wake.clear()
                    self._ack_timer_idle = due is None
            if batch:
                self._sends.spawn(self._send_acks, batch)
            else:
                await self._ack_wake.wait(None if due is None else due - rt.now())

    async def _claim_with_acks(self, claim: Statement, batch: Batch) -> List[Row]:
        """Sends a claim (not held) and a batch of acks in one request: the
        acks' statements, then the claim's. Should it fail, the acks are
        sent alone as :meth:`_send_acks` sends them; the claim's failure is
        raised, unless an ack was refused: a ``/batch`` runs all or
        nothing, so the refused ack is reported, the others are sent alone
        and the claim, which did not run, is sent again at once."""
        work = self._ack_work(batch)
        try:
            answers = list(await self._claims.take_with([stmt for _, stmt in work], claim))
        except FenecError as e:
            if e.at is not None and e.at < len(work) and not is_fault(e):
                self._acks_refused([work[e.at]], e)
                refused = work[e.at][0][0].owner
                rest = {owner: runs for owner, runs in batch.items() if owner != refused}
                if rest:
                    self._sends.spawn(self._send_acks, rest)
                return []
            self._sends.spawn(self._send_acks, batch)
            raise
        except BaseException:  # given up, or the run itself cancelled
            self._sends.spawn(self._send_acks, batch)
            raise
        self._acked(work, answers[:-1])
        return rows_of(answers[-1])

    def _ack_work(self, batch: Batch) -> List[Tuple[List[_Run], Statement]]:
        return [(runs, self._plan.ack([r.row.get("id") for r in runs], owner)) for owner, runs in batch.items()]

    def _acks_refused(self, work: List[Tuple[List[_Run], Statement]], e: FenecError) -> None:
        for runs, _ in work:
            for r in runs:
                self._report("ack", r.row.get("id"), e)

    def _acked(self, work: List[Tuple[List[_Run], Statement]], answers: List[Any]) -> None:
        """A job whose id its ack's answer does not list lost its lease."""
        for (runs, _), answer in zip(work, answers):
            acked = ids_of(answer)
            for r in runs:
                if r.row.get("id") not in acked:
                    self._report("lost_lease", r.row.get("id"), LostLease(r.row.get("id"), r.owner, "ack"))

    async def _send_acks(self, batch: Batch) -> None:
        """Acks a batch, one statement per claim owner (several in one
        request); a job whose id the answer does not list lost its lease."""
        work = self._ack_work(batch)
        faults = 0
        while True:
            try:
                if len(work) == 1:
                    answers: List[Any] = [await self._db.query(work[0][1])]
                else:
                    answers = list(await self._db.batch([stmt for _, stmt in work]))
                break
            except FenecError as e:
                if not is_fault(e):  # refused: sending it again gets the same
                    self._acks_refused(work, e)
                    return
                faults += 1
                self._report("ack", None, e)
                if not await self._pause(faults):
                    return
        self._acked(work, answers)

    async def _keep(self) -> None:
        """Extends running jobs' leases every lease/2: the ones due at one
        tick together, one statement per claim owner, each in a task (a
        thread) of its own, so one that hangs holds up no other's. It
        wakes at least every lease/2, so a job's start need not wake it."""
        every = self.options.lease / 2
        while True:
            with self._lock:
                if self._ended:
                    return
                now = rt.now()
                waiting = [r for r in self._running.values() if not r.lost and not r.extending]
                due: Batch = {}
                for r in waiting:
                    if r.next_at <= now:
                        r.extending = True
                        r.next_at = now + every
                        due.setdefault(r.owner, []).append(r)
                soonest = min((r.next_at for r in waiting if not r.extending), default=None)
                if not due:
                    self._keep_wake.clear()
            for owner, runs in due.items():
                self._extensions.spawn(self._extend, owner, runs, every)
            if not due:
                # Never asleep past lease/2: a job started meanwhile is due
                # no sooner, so no start has to wake the keeper.
                await self._keep_wake.wait(every if soonest is None else soonest - now)

    async def _extend(self, owner: str, runs: List[_Run], every: float) -> None:
        try:
            answer = await self._db.query(self._plan.extend([r.row.get("id") for r in runs], owner), timeout=every)
        except FenecError as e:
            self._report("extend", runs[0].row.get("id") if len(runs) == 1 else None, e)  # the next tick tries again
        else:
            held = ids_of(answer)
            for r in runs:
                with self._lock:
                    running = id(r) in self._running
                if running and r.row.get("id") not in held:
                    r.lost = True
                    r.job.cancel()
                    self._report("lost_lease", r.row.get("id"), LostLease(r.row.get("id"), owner, "extend"))
        finally:
            with self._lock:
                for r in runs:
                    r.extending = False
            self._keep_wake.set()

    async def _until_idle(self, seconds: float) -> bool:
        """Whether no handler is running (nor its fail or release being
        sent, nor its batch of acks being handed over) within ``seconds``."""
        deadline = rt.now() + seconds
        while True:
            with self._lock:
                if self._in_flight == 0 and self._flushing == 0:
                    return True
                self._wake.clear()
            left = deadline - rt.now()
            if left <= 0:
                return False
            await self._wake.wait(left)

    async def _drain(self) -> None:
        """After the claims: running handlers get what is left of the
        grace, then are cancelled (their jobs released), and those that do
        not end a second later are given up; the acks are sent."""
        if not await self._until_idle(self._deadline - rt.now()):
            with self._lock:
                for run in self._running.values():
                    run.stopped = True
                    run.job.cancel()
            if not await self._until_idle(ABANDON_AFTER):
                # Handlers that do not heed their cancellation are given up:
                # nothing is sent for their jobs, whose leases lapse.
                with self._lock:
                    for run in self._running.values():
                        run.abandoned = True
        with self._lock:
            batch = self._take_acks()
        if batch:
            await self._send_acks(batch)
        await self._sends.join(max(0.0, self._deadline - rt.now()) + ABANDON_AFTER)

    async def _pause(self, faults: int) -> bool:
        """Waits out the backoff before a fault is retried; ``False`` when
        the worker is stopping and its grace has ended: not retried."""
        delay = self.options.backoff(faults)
        with self._lock:
            stopping = self._stopping
        if stopping:
            left = self._deadline - rt.now()
            if left <= 0:
                return False
            delay = min(delay, left)
        await rt.sleep(delay)
        return True

    async def _send(self, stmt: Statement, step: str, job_id: Any) -> None:
        """Sends a fail or release, retrying faults with backoff until it
        is answered, or a stop's grace period is over. A refusal is
        reported once and not sent again (a 412: the lease was lost)."""
        faults = 0
        while True:
            try:
                await self._db.query(stmt)
                return
            except FenecError as e:
                if not is_fault(e):
                    self._report("lost_lease" if e.code == "unmet" else step, job_id, e)
                    return
                faults += 1
                self._report(step, job_id, e)
                if not await self._pause(faults):
                    return

    def _report(self, step: str, job_id: Any, cause: BaseException) -> None:
        error = WorkerError(step, job_id, cause)
        try:
            self.options.on_error(error)
        except Exception as hook:
            _report_hook_failure(error, hook)


def _report_hook_failure(error: WorkerError, hook: Exception) -> None:
    """An ``on_error`` that raises: logged, and the worker goes on."""
    logging.getLogger("fenecdb.worker").error("fenecdb worker: on_error raised %r on %s", hook, error)
