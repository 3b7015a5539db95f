"""The few concurrency parts the worker (``_async/worker.py``) is written
against, on asyncio. ``_sync/_runtime.py`` has the same names on threads;
the worker itself is written once and turned into the threaded one by
unasync (``scripts/unasync_clients.py``), as the clients are."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Awaitable, Callable, List, Optional, Set

from .._calls import MAX_WAIT
from .._codec import Answer, Results, Row
from .client import AsyncClient

AsyncHandler = Callable[[Row], Awaitable[Any]]
"""Runs one job; cancelled (asyncio cancellation) when its lease is lost or
the worker's grace period on stop ends."""


class GivenUp(Exception):
    """A held claim given up by :meth:`Claims.give_up`."""


def now() -> float:
    return time.monotonic()


class Event:
    """Set once something happened; :meth:`wait` waits for it. A flag and
    the futures waiting on it: a wait with a timeout is one timer on the
    loop, where ``asyncio.wait_for`` would make a task per wait."""

    def __init__(self) -> None:
        self._set = False
        self._waiters: "List[asyncio.Future[None]]" = []

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self, timeout: Optional[float] = None) -> bool:
        """Whether it was set within ``timeout`` seconds (``None``: no limit)."""
        if self._set:
            return True
        loop = asyncio.get_running_loop()
        waiter: "asyncio.Future[None]" = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(max(0.0, timeout), _wake, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            try:
                self._waiters.remove(waiter)
            except ValueError:  # set() took it already
                pass
        return self._set


def _wake(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_result(None)


Lock = threading.Lock
"""A lock around the worker's state. On one event loop there is nothing
to hold (no ``await`` happens inside it, and it is never taken twice), but
a thread lock's C methods cost less than a Python class whose
``__enter__`` does nothing, and the worker takes it a few times per job."""


class Group:
    """Runs functions concurrently (asyncio tasks) and waits for them."""

    def __init__(self, name: str, size: Optional[int] = None) -> None:
        self._tasks: Set["asyncio.Future[Any]"] = set()

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        task = asyncio.ensure_future(fn(*args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def join(self, timeout: Optional[float] = None) -> bool:
        """Whether every function ended within ``timeout`` seconds."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=None if timeout is None else max(0.0, timeout))
        return not self._tasks

    def close(self) -> None:
        """Cancels what still runs (a function given up)."""
        for task in list(self._tasks):
            task.cancel()


class Job:
    """One job's handler, run in the calling task by :meth:`outcome` (a
    task per job, not two); :meth:`cancel` cancels that task while the
    handler runs, and only then."""

    def __init__(self, handler: AsyncHandler, row: Row) -> None:
        self._handler = handler
        self._row = row
        self._task: "Optional[asyncio.Task[Any]]" = None
        self._cancelled = False

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        if self._task is not None:
            self._task.cancel()

    async def outcome(self) -> Optional[BaseException]:
        """``None`` when the handler returned, else what it raised (its
        cancellation a :class:`asyncio.CancelledError`). A cancellation
        that is not :meth:`cancel`'s (the task's own) goes on up."""
        if self._cancelled:
            return asyncio.CancelledError("the handler was cancelled")
        task = self._task = asyncio.current_task()
        try:
            await self._handler(self._row)
        except asyncio.CancelledError as e:
            if not self._cancelled and (task is None or getattr(task, "cancelling", lambda: 1)()):
                raise  # the worker's own task is being cancelled
            if task is not None and hasattr(task, "uncancel"):
                task.uncancel()  # the cancel was the handler's, now handled
            return e
        except Exception as e:
            return e
        finally:
            self._task = None
        return None


class Claims:
    """Sends the worker's claims, one at a time, so that :meth:`give_up`
    can end a claim held at the server at once (cancelling the request
    closes its connection: the server drops the claim)."""

    def __init__(self, db: AsyncClient) -> None:
        self._db = db
        self._task: "Optional[asyncio.Future[Answer]]" = None
        self._given_up = False
        self._busy = True

    async def take(self, statement: Any, wait: float) -> Answer:
        """The claim's answer; :class:`GivenUp` once :meth:`give_up` was
        called. While the queue is busy (the last claim took jobs) it is
        sent not held (``wait`` 0), in the calling task: nothing to give
        up, and no task of its own to make; only a claim that finds nothing
        ready is then held, in a task that :meth:`give_up` cancels."""
        if self._given_up:
            raise GivenUp()
        if self._busy or wait <= 0:
            answer = await self._db.query(statement, wait=0)
            self._busy = not isinstance(answer, list) or len(answer) > 0
            if self._busy or wait <= 0:
                return answer
            if self._given_up:
                raise GivenUp()
        task = self._task = asyncio.ensure_future(self._db.query(statement, wait=min(wait, MAX_WAIT)))
        try:
            await asyncio.wait({task})
        finally:
            if not task.done():
                task.cancel()
            self._task = None
        if task.cancelled():
            raise GivenUp()
        answer = task.result()
        self._busy = not isinstance(answer, list) or len(answer) > 0
        return answer

    def busy(self) -> bool:
        """Whether the next claim is sent not held (the last one took jobs)."""
        return self._busy

    async def take_with(self, statements: List[Any], claim: Any) -> Results:
        """A claim not held, sent after ``statements`` in one ``/batch``:
        their answers, then the claim's."""
        if self._given_up:
            raise GivenUp()
        answers = await self._db.batch([*statements, claim], wait=0)
        self._busy = len(answers) > 0 and (not isinstance(answers[-1], list) or len(answers[-1]) > 0)
        return answers

    def give_up(self) -> None:
        self._given_up = True
        if self._task is not None:
            self._task.cancel()

    async def end(self) -> None:
        return None


async def sleep(seconds: float) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)


def background(fn: Callable[[], Awaitable[Any]]) -> "asyncio.Future[Any]":
    """Runs ``fn`` in the background: a task of the running loop."""
    return asyncio.ensure_future(fn())
