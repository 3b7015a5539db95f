"""What both workers share (docs/workers.md): their options and defaults,
the statements they send — each rendered by the builder, each in
conformance/builder-golden.json — the backoff, and which failures are
faults to retry. ``Worker`` (threads) and ``AsyncWorker`` (asyncio) are in
``_worker_sync.py`` and ``_worker_async.py``."""

from __future__ import annotations

import logging
import math
import random
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ._builder import Query, Raw, Statement, expr, inc, raw
from ._codec import Row
from ._errors import FenecError

Backoff = Callable[[int], float]
"""Seconds to wait before the ``n``-th retry (``n`` from 1)."""

OnError = Callable[[BaseException, str], None]
"""Told of each fault the worker survives: the error, and what it was doing."""

_log = logging.getLogger("fenecdb.worker")


def default_backoff(n: int) -> float:
    """The default backoff: exponential from 1 s, capped at 1 h, with full
    jitter (a random delay from 0 to the cap), so retries spread out."""
    cap = 3600.0 if n > 12 else min(3600.0, 2.0 ** (n - 1))
    return random.uniform(0, cap)


def log_error(error: BaseException, doing: str) -> None:
    """The default ``on_error``: a warning on the ``fenecdb.worker`` logger."""
    _log.warning("fenecdb worker: %s: %s", doing, error)


def _seconds(name: str, value: float, low: float = 0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= low:
        raise ValueError(f"{name} is a number of seconds above {low:g}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Options:
    """A worker's options, checked (see :class:`fenecdb.Worker`)."""

    concurrency: int
    lease: float
    wait: float
    max_attempts: int
    backoff: Backoff
    where: Optional[Raw]
    owner: str
    grace: float
    on_error: OnError

    @staticmethod
    def make(
        concurrency: int = 10,
        lease: float = 30,
        wait: float = 30,
        max_attempts: int = 5,
        backoff: Optional[Backoff] = None,
        where: Optional[Raw] = None,
        owner: Optional[str] = None,
        grace: float = 30,
        on_error: Optional[OnError] = None,
    ) -> "Options":
        for name, n in (("concurrency", concurrency), ("max_attempts", max_attempts)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"{name} is a whole number from 1, got {n!r}")
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 30:
            raise ValueError(f"wait is a number of seconds from 0 to 30, got {wait!r}")
        if where is not None and not isinstance(where, Raw):
            raise TypeError(f"where is a condition made by raw(...), got {where!r}")
        if owner is not None and (not isinstance(owner, str) or not owner or ":" in owner):
            raise ValueError(f"owner (the owner prefix) is text without ':', got {owner!r}")
        if grace != 0:
            grace = _seconds("grace", grace)
        return Options(
            concurrency=concurrency,
            lease=_seconds("lease", lease, 0.01),
            wait=float(wait),
            max_attempts=max_attempts,
            backoff=backoff or default_backoff,
            where=where,
            owner=owner or f"w-{secrets.token_hex(4)}",
            grace=float(grace),
            on_error=on_error or log_error,
        )


class Plan:
    """The worker's statements on its collection, rendered by the builder."""

    def __init__(self, jobs: Query[Any], options: Options) -> None:
        self.jobs = jobs
        self.o = options
        self.lease_ms = round(options.lease * 1000)
        self.claims = 0

    def owner(self) -> str:
        """The next claim's owner: ``<prefix>:<claim counter>``, a token per
        claim, so two claims of one job by one worker are told apart."""
        self.claims += 1
        return f"{self.o.owner}:{self.claims}"

    def claim(self, owner: str, free: int) -> Statement:
        q = self.jobs.where(raw("run_at <= now()"))
        if self.o.where is not None:
            q = q.where(self.o.where)
        patch = {"owner": owner, "run_at": expr("now() + ?", self.lease_ms), "attempts": inc(1)}
        return q.order("run_at").limit(free).render_update(patch, returning=True)

    def _mine(self, job: Row, owner: str) -> Query[Any]:
        return self.jobs.where("id", job["id"]).where("owner", owner)

    def extend(self, job: Row, owner: str) -> Statement:
        return self._mine(job, owner).render_update({"run_at": expr("now() + ?", self.lease_ms)}, require=1)

    def ack(self, job: Row, owner: str) -> Statement:
        return self._mine(job, owner).render_delete(require=1)

    def fail(self, job: Row, owner: str, error: BaseException) -> Statement:
        """The backoff statement, or past ``max_attempts`` a dead letter."""
        text = error_text(error)
        attempts = job.get("attempts")
        n = attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else 1
        if n >= self.o.max_attempts:
            return self._mine(job, owner).render_update({"owner": None, "error": text, "run_at": None}, require=1)
        delay = round(max(0.0, self.o.backoff(n)) * 1000)
        patch = {"owner": None, "error": text, "run_at": expr("now() + ?", delay)}
        return self._mine(job, owner).render_update(patch, require=1)

    def release(self, job: Row, owner: str) -> Statement:
        """A job claimed but not run, given back: another worker may take it
        now, and the run that did not happen is not counted."""
        return self._mine(job, owner).render_update(_RELEASE, require=1)

    def release_claim(self, owner: str) -> Statement:
        """Every job of a claim that was given up: the server may have taken
        some for it in the moment it was given up."""
        return self.jobs.where("owner", owner).render_update(_RELEASE)


_RELEASE = {"owner": None, "run_at": expr("now()"), "attempts": inc(-1)}


ABANDON_AFTER = 1.0
"""Seconds a stopping worker waits, past the grace period, for cancelled
handlers to end before it gives their jobs up (their leases lapse)."""


def error_text(error: BaseException) -> str:
    """A handler's error as the job's ``error`` field holds it."""
    text = str(error)
    return (f"{type(error).__name__}: {text}" if text else type(error).__name__)[:2000]


def is_fault(error: BaseException) -> bool:
    """Whether a failed call is retried: no answer came (``network``,
    ``timeout``) or the server's 5xx (``unavailable``, ``internal``, a
    proxy's 502), as docs/workers.md's "Faults" has it. A 4xx is a refusal
    of the statement itself: sending it again gets the same."""
    return isinstance(error, FenecError) and (error.status == 0 or error.status >= 500)


def refusal_doing(error: FenecError, doing: str) -> str:
    """What ``on_error`` is told of a refused ack, fail or release: a lost
    lease for ``unmet``, else the refusal."""
    return f"{doing}: the lease was lost" if error.code == "unmet" else f"{doing}: refused, not sent again"
