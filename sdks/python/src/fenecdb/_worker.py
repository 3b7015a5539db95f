"""What both workers share (docs/workers.md): their options and defaults,
the statements they send — each rendered by the builder, each in
conformance/builder-golden.json — the backoff, and which failures are
faults to retry. ``AsyncWorker`` is written once, in ``_async/worker.py``;
``Worker`` (threads) is generated from it (``_sync/worker.py``)."""

from __future__ import annotations

import inspect
import logging
import math
import random
import secrets
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Set, Tuple

from ._builder import Query, Raw, Statement, expr, inc, raw
from ._codec import Row
from ._errors import FenecError

Backoff = Callable[[int], float]
"""Seconds to wait before the ``n``-th retry (``n`` from 1)."""


class WorkerError(Exception):
    """What a worker reports through ``on_error`` (docs/workers.md, "What
    is reported"): the ``step`` — ``claim``, ``extend``, ``ack``, ``fail``,
    ``release``, ``handler`` (a failed attempt), ``dead_letter``,
    ``lost_lease`` — the job's ``job_id`` when the step is about one job
    (else ``None``), and the ``cause`` (also ``__cause__``): a
    :class:`FenecError`, or what the handler raised."""

    def __init__(self, step: str, job_id: Any, cause: BaseException) -> None:
        self.step = step
        self.job_id = job_id
        self.cause = cause
        job = "" if job_id is None else f" (job {job_id!r})"
        super().__init__(f"{step}{job}: {error_text(cause)}")
        self.__cause__ = cause


class LostLease(Exception):
    """The cause of a ``lost_lease`` report from an ack or an extension:
    the server's answer did not list the job — its lease had lapsed, and
    the job may be another worker's now."""

    def __init__(self, job_id: Any, owner: str, step: str) -> None:
        super().__init__(f"the lease of job {job_id!r} was lost: owner {owner} no longer holds it ({step})")
        self.job_id = job_id
        self.owner = owner


OnError = Callable[[WorkerError], None]
"""Told of each fault the worker survives, each failed attempt, dead letter
and lost lease: one :class:`WorkerError`."""

_log = logging.getLogger("fenecdb.worker")

ERROR_STEPS = frozenset({"dead_letter", "lost_lease"})
"""The steps logged as errors by default; the others are warnings."""


def log_error(error: WorkerError) -> None:
    """The default ``on_error``: the ``fenecdb.worker`` logger — a dead
    letter and a lost lease as errors, the rest (a failed attempt, a
    fault retried) as warnings."""
    level = logging.ERROR if error.step in ERROR_STEPS else logging.WARNING
    _log.log(level, "fenecdb worker: %s", error, exc_info=error.cause if error.step in ("handler", "dead_letter") else None)


def _hook(on_error: Optional[Callable[..., None]]) -> OnError:
    """``on_error`` as one taking a :class:`WorkerError`; a hook of the
    older form ``(error, doing)`` is called so, with a DeprecationWarning."""
    if on_error is None:
        return log_error
    try:
        params = [
            p for p in inspect.signature(on_error).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        return on_error
    if len(params) < 2:
        return on_error
    warnings.warn(
        "on_error(error, doing) is deprecated: on_error takes one fenecdb.WorkerError (its step, job_id and cause)",
        DeprecationWarning,
        stacklevel=4,
    )
    old = on_error
    return lambda e: old(e.cause, str(e))


def default_backoff(n: int) -> float:
    """The default backoff: exponential from 1 s, capped at 1 h, with full
    jitter (a random delay from 0 to the cap), so retries spread out."""
    cap = 3600.0 if n > 12 else min(3600.0, 2.0 ** (n - 1))
    return random.uniform(0, cap)


def _seconds(name: str, value: float, low: float = 0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= low:
        raise ValueError(f"{name} is a number of seconds above {low:g}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Options:
    """A worker's options, checked (see :class:`fenecdb.AsyncWorker`)."""

    concurrency: int
    lease: float
    wait: float
    max_attempts: int
    backoff: Backoff
    where: Optional[Raw]
    owner_prefix: str
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
        owner_prefix: Optional[str] = None,
        grace: float = 30,
        on_error: Optional[Callable[..., None]] = None,
        owner: Optional[str] = None,
    ) -> "Options":
        for name, n in (("concurrency", concurrency), ("max_attempts", max_attempts)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"{name} is a whole number from 1, got {n!r}")
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 30:
            raise ValueError(f"wait is a number of seconds from 0 to 30, got {wait!r}")
        if where is not None and not isinstance(where, Raw):
            raise TypeError(f"where is a condition made by raw(...), got {where!r}")
        if owner is not None:
            warnings.warn("owner is deprecated: the option is owner_prefix", DeprecationWarning, stacklevel=3)
            if owner_prefix is not None:
                raise ValueError("owner_prefix and owner (its deprecated name) are the same option: give one")
            owner_prefix = owner
        if owner_prefix is not None and (not isinstance(owner_prefix, str) or not owner_prefix or ":" in owner_prefix):
            raise ValueError(f"owner_prefix is text without ':', got {owner_prefix!r}")
        if isinstance(lease, (int, float)) and not isinstance(lease, bool) and 0 < lease < MIN_LEASE:
            raise ValueError(f"lease is at least {MIN_LEASE:g} s (100 ms), got {lease!r}")
        if grace != 0:
            grace = _seconds("grace", grace)
        return Options(
            concurrency=concurrency,
            lease=_seconds("lease", lease, 0),
            wait=float(wait),
            max_attempts=max_attempts,
            backoff=backoff or default_backoff,
            where=where,
            owner_prefix=owner_prefix or f"w-{secrets.token_hex(4)}",
            grace=float(grace),
            on_error=_hook(on_error),
        )


MIN_LEASE = 0.1
"""The shortest lease, in seconds, in every SDK (docs/sdks.md)."""

ACK_WINDOW = 0.005
"""Seconds acks gather from the first one before they are sent together."""

ACK_BATCH = 100
"""Acks sent together at most; a full batch is sent at once."""


class Plan:
    """The worker's statements on its collection, rendered by the builder."""

    def __init__(self, jobs: Query[Any], options: Options) -> None:
        self.jobs = jobs
        self.o = options
        self.lease_ms = round(options.lease * 1000)
        self.claims = 0
        self._shapes: Dict[Tuple[str, int], Tuple[Statement, Dict[int, str]]] = {}

    def _shaped(self, kind: str, size: int, render: Callable[[Any, Any], Statement], ids: Any, owner: str) -> Statement:
        """A statement the worker sends again and again, rendered by the
        builder once per ``kind`` and ``size`` with stand-ins for its ids
        and owner, which each call puts in their places: rendering took
        more CPU than sending. Rendered in full when a stand-in is not
        found once among the parameters."""
        shape = self._shapes.get((kind, size))
        if shape is None:
            stmt = render(_IDS, _OWNER)
            slots = {i: "ids" for i, p in enumerate(stmt.params) if p == _IDS}
            slots.update({i: "owner" for i, p in enumerate(stmt.params) if p == _OWNER})
            if sorted(slots.values()) != sorted(["owner"] + (["ids"] if ids is not None else [])):
                return render(ids, owner)
            shape = self._shapes[(kind, size)] = (stmt, slots)
        stmt, slots = shape
        values = {"ids": ids, "owner": owner}
        params = tuple(values[slots[i]] if i in slots else p for i, p in enumerate(stmt.params))
        return Statement(stmt.query, params, stmt.collection)

    def owner(self) -> str:
        """The next claim's owner: ``<prefix>:<claim counter>``, a token per
        claim, so two claims of one job by one worker are told apart."""
        self.claims += 1
        return f"{self.o.owner_prefix}:{self.claims}"

    def claim(self, owner: str, free: int) -> Statement:
        return self._shaped("claim", free, lambda _, o: self._claim(o, free), None, owner)

    def _claim(self, owner: str, free: int) -> Statement:
        q = self.jobs.where(raw("run_at <= now()"))
        if self.o.where is not None:
            q = q.where(self.o.where)
        patch = {"owner": owner, "run_at": expr("now() + ?", self.lease_ms), "attempts": inc(1)}
        return q.order("run_at").limit(free).render_update(patch, returning=True)

    def _mine(self, job: Row, owner: str) -> Query[Any]:
        return self.jobs.where("id", job["id"]).where("owner", owner)

    def _ours(self, ids: Sequence[Any], owner: str) -> Query[Any]:
        return self.jobs.where("id", "in", list(ids)).where("owner", owner)

    def extend(self, ids: Sequence[Any], owner: str) -> Statement:
        """One claim's jobs' leases extended; the answer lists the ids still held."""
        return self._shaped("extend", 0, self._extend, list(ids), owner)

    def _extend(self, ids: Sequence[Any], owner: str) -> Statement:
        return self._ours(ids, owner).render_update({"run_at": expr("now() + ?", self.lease_ms)}, returning=["id"])

    def ack(self, ids: Sequence[Any], owner: str) -> Statement:
        """One claim's jobs done; the answer lists the ids deleted."""
        return self._shaped("ack", 0, self._ack, list(ids), owner)

    def _ack(self, ids: Sequence[Any], owner: str) -> Statement:
        return self._ours(ids, owner).render_delete(returning=["id"])

    def dead(self, job: Row) -> bool:
        """Whether a failed run is the job's last (a dead letter)."""
        attempts = job.get("attempts")
        n = attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else 1
        return n >= self.o.max_attempts

    def fail(self, job: Row, owner: str, error: BaseException) -> Statement:
        """The backoff statement, or past ``max_attempts`` a dead letter."""
        text = error_text(error)
        if self.dead(job):
            return self._mine(job, owner).render_update({"owner": None, "error": text, "run_at": None}, require=1)
        attempts = job.get("attempts")
        n = attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else 1
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


_IDS = ["\x00ids"]
_OWNER = "\x00owner"
"""Stand-ins for the ids and the owner in a statement rendered once
(:meth:`Plan._shaped`): no job's id or owner is either."""

_RELEASE = {"owner": None, "run_at": expr("now()"), "attempts": inc(-1)}


ABANDON_AFTER = 1.0
"""Seconds a stopping worker waits, past the grace period, for cancelled
handlers to end before it gives their jobs up (their leases lapse)."""


def error_text(error: BaseException) -> str:
    """A handler's error as the job's ``error`` field holds it: its message
    alone, or its type's name when the message is empty."""
    return (str(error) or type(error).__name__)[:2000]


def is_fault(error: BaseException) -> bool:
    """Whether a failed call is retried: no answer came (``network``,
    ``timeout``) or the server's 5xx (``unavailable``, ``internal``, a
    proxy's 502), as docs/workers.md's "Faults" has it. A 4xx is a refusal
    of the statement itself: sending it again gets the same."""
    return isinstance(error, FenecError) and (error.status == 0 or error.status >= 500)


def ids_of(answer: Any) -> Set[Any]:
    """The ids an ack's or extension's answer lists."""
    return {r.get("id") for r in answer} if isinstance(answer, list) else set()
