"""The few concurrency parts the worker (``_sync/worker.py``, generated from
``_async/worker.py``) is written against, on threads: the names of
``_async/_runtime.py``, written by hand for threads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, List, Optional, Tuple

import httpx

from .._async.client import AsyncClient
from .._calls import MAX_WAIT
from .._codec import Answer, Results, Row
from .client import Client

Handler = Callable[[Row, threading.Event], Any]
"""Runs one job in a thread of the worker's pool. The event is set when
the handler is to give up — its lease was lost, or the worker's grace
period on stop ended; a thread cannot be stopped from outside, so a
handler that runs long checks it (``if cancel.is_set(): return``)."""


class GivenUp(Exception):
    """A held claim given up by :meth:`Claims.give_up`."""


def now() -> float:
    return time.monotonic()


class Event:
    """Set once something happened; :meth:`wait` waits for it."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self._event.wait(None if timeout is None else max(0.0, timeout))


Lock = threading.Lock


class Group:
    """Runs functions concurrently, each in a thread — one of up to
    ``size`` the group keeps, started as they are needed, or a thread of
    its own — and waits for them.

    A kept thread takes the next function from the group's queue when it
    ends one, and sleeps only once the queue is empty. Waking a sleeping
    thread costs more than a short job (a system call, and a thread that
    wants the interpreter's lock the waker holds), so one thread at a time
    is being woken: the woken one wakes the next if it finds more queued
    behind the function it takes. Queued functions still start at once
    while threads are free — a chain of wakes, not a wake each."""

    def __init__(self, name: str, size: Optional[int] = None) -> None:
        self._name = name
        self._size = size
        self._queue: "Deque[Tuple[Callable[..., Any], Tuple[Any, ...]]]" = deque()
        self._sleeping: List[threading.Lock] = []  # each a sleeping kept thread's gate, held
        self._waking = False  # a kept thread is being woken or started
        self._threads = 0
        self._closed = False
        self._lock = threading.Lock()
        self._running = 0  # handed over and not ended, queued ones too
        self._joining = 0
        self._idle = threading.Condition(self._lock)

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._size is None:
            with self._lock:
                self._running += 1
            threading.Thread(target=self._run, args=(fn, args), name=self._name, daemon=True).start()
            return
        with self._lock:
            self._running += 1
            self._queue.append((fn, args))
            gate = self._wake()
        self._go(gate)

    def _wake(self) -> "Optional[threading.Lock | bool]":
        """Under the lock: the gate of a sleeping thread to open, ``True``
        to start a thread, or ``None`` (one is being woken already, or
        none is free)."""
        if self._waking or self._closed:
            return None
        if self._sleeping:
            self._waking = True
            return self._sleeping.pop()
        if self._threads < (self._size or 0):
            self._waking = True
            self._threads += 1
            return True
        return None

    def _go(self, gate: "Optional[threading.Lock | bool]") -> None:
        if gate is True:
            threading.Thread(target=self._serve, name=f"{self._name}-{self._threads}", daemon=True).start()
        elif isinstance(gate, type(self._lock)):
            gate.release()

    def _run(self, fn: Callable[..., Any], args: Tuple[Any, ...]) -> None:
        try:
            fn(*args)
        except Exception:  # the worker's functions report their own failures
            logging.getLogger("fenecdb.worker").exception("fenecdb worker: %s raised", getattr(fn, "__name__", fn))
        finally:
            with self._lock:
                self._running -= 1
                if self._joining and self._running == 0:
                    self._idle.notify_all()

    def _serve(self) -> None:
        gate = threading.Lock()
        gate.acquire()
        woken = True  # started as the one being woken
        while True:
            with self._lock:
                if woken:
                    self._waking = False
                    woken = False
                if self._queue:
                    item: "Optional[Tuple[Callable[..., Any], Tuple[Any, ...]]]" = self._queue.popleft()
                    after = self._wake() if self._queue else None
                elif self._closed:
                    return
                else:
                    item, after = None, None
                    self._sleeping.append(gate)
            if item is None:
                gate.acquire()  # until woken (or closed)
                woken = True
                continue
            self._go(after)
            self._run(*item)

    def join(self, timeout: Optional[float] = None) -> bool:
        with self._lock:
            self._joining += 1
            try:
                return self._idle.wait_for(lambda: self._running == 0, None if timeout is None else max(0.0, timeout))
            finally:
                self._joining -= 1

    def close(self) -> None:
        """Lets what still runs end alone (a thread cannot be stopped);
        the kept threads end once the queue is done."""
        with self._lock:
            self._closed = True  # none is woken any more: each ends once the queue is empty
            sleeping, self._sleeping = self._sleeping, []
        for gate in sleeping:
            gate.release()


class Job:
    """One job's handler, run in the calling thread by :meth:`outcome`;
    :meth:`cancel` sets the event it is given."""

    def __init__(self, handler: Handler, row: Row) -> None:
        self._handler = handler
        self._row = row
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    def outcome(self) -> Optional[BaseException]:
        """``None`` when the handler returned, else what it raised."""
        try:
            self._handler(self._row, self._cancel)
        except Exception as e:
            return e
        return None


class _InThread(httpx.AsyncBaseTransport):
    """A client's blocking transport (its TLS, proxy, auth: whatever the
    user gave ``connect(transport=…)``) for the claims' asyncio client: each
    request runs it in a thread and is read whole there. A request given
    up is left to end in its thread (a blocking transport cannot be
    interrupted)."""

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


class Claims:
    """Sends the worker's claims, one at a time, so that :meth:`give_up`
    can end a claim held at the server at once, from another thread: a
    blocking request cannot be given up, so claims go over an asyncio
    twin of the client — the same nodes, token, timeout, TLS, proxy,
    headers and field types — on an event loop in a thread of its own;
    cancelling its request closes the connection, and the server drops
    the claim. With a ``transport`` of the user's own, a claim given up
    stays held at the server until its ``wait`` ends."""

    def __init__(self, db: Client) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._future: "Optional[concurrent.futures.Future[Answer]]" = None
        self._given_up = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._client: List[AsyncClient] = []
        self._busy = True

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="fenecdb-claims", daemon=True)
            self._thread.start()
            db = self._db

            async def make() -> None:
                transport = None if db._transport is None else _InThread(db._transport)
                self._client.append(AsyncClient._twin(db._config, db._settings, transport))

            asyncio.run_coroutine_threadsafe(make(), self._loop).result()
        return self._loop

    def take(self, statement: Any, wait: float) -> Answer:
        """The claim's answer. While the queue is busy (the last claim took
        jobs) it is asked first of the worker's own client in this thread,
        not held (``wait`` 0): nothing to give up, and no hop to the event
        loop's thread and back; only a claim that finds nothing ready is
        then held, on the asyncio twin."""
        if self._busy or wait <= 0:
            with self._lock:
                if self._given_up:
                    raise GivenUp()
            answer = self._db.query(statement, wait=0)
            self._busy = not isinstance(answer, list) or len(answer) > 0
            if self._busy or wait <= 0:
                return answer
        loop = self._start()
        with self._lock:
            if self._given_up:
                raise GivenUp()
            future = self._future = asyncio.run_coroutine_threadsafe(
                self._client[0].query(statement, wait=min(wait, MAX_WAIT)), loop
            )
        try:
            answer = future.result()
            self._busy = not isinstance(answer, list) or len(answer) > 0
            return answer
        except concurrent.futures.CancelledError:
            raise GivenUp() from None
        finally:
            with self._lock:
                self._future = None

    def busy(self) -> bool:
        """Whether the next claim is sent not held (the last one took jobs)."""
        return self._busy

    def take_with(self, statements: List[Any], claim: Any) -> Results:
        """A claim not held, sent after ``statements`` in one ``/batch``
        from this thread: their answers, then the claim's."""
        with self._lock:
            if self._given_up:
                raise GivenUp()
        answers = self._db.batch([*statements, claim], wait=0)
        self._busy = len(answers) > 0 and (not isinstance(answers[-1], list) or len(answers[-1]) > 0)
        return answers

    def give_up(self) -> None:
        with self._lock:
            self._given_up = True
            future = self._future
        if future is not None:
            future.cancel()

    def end(self) -> None:
        if self._loop is None:
            return
        loop = self._loop
        if self._client:
            asyncio.run_coroutine_threadsafe(self._client[0].aclose(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join()
        loop.close()


def sleep(seconds: float) -> None:
    if seconds > 0:
        time.sleep(seconds)


def background(fn: Callable[[], Any]) -> threading.Thread:
    """Runs ``fn`` in the background: a thread of its own."""
    thread = threading.Thread(target=fn, name="fenecdb-worker", daemon=True)
    thread.start()
    return thread
