"""The errors a call raises (docs/sdks.md, "Errors"), as one hierarchy:
:class:`FenecError` at its root; :class:`ConnectionFailed` when no answer
came (its subclass :class:`TimedOut` when none came in time); and
:class:`StatusError` when the server answered with an error — a subclass
per ``code`` of openapi.yaml, generated into ``_generated.py`` — or with
something that is not the API's (:class:`UnexpectedAnswer`). The older
names ``NetworkError`` and ``Timeout`` stay, as the same classes. httpx's
exceptions never escape; they are the ``__cause__``."""

from __future__ import annotations

from typing import Optional

RETRYABLE_CODES = frozenset({"network", "timeout", "unavailable", "internal"})
"""The codes of a fault a call may be retried on (``max_retries``)."""


class FenecError(Exception):
    """A call that failed.

    ``status`` is the HTTP status (0 when there was no answer), ``code`` the
    kind of error (openapi.yaml's codes — ``"unmet"``, ``"conflict"``, … —
    or ``"network"``, ``"timeout"``, ``"unexpected"``), ``message`` what is
    wrong and where, ``at`` the 0-based statement of a ``/batch`` that was
    refused (else ``None``), ``leader`` the leader's URL a cluster node's
    403 ``forbidden`` named in its ``Fenec-Leader`` header (else ``None``;
    docs/sdks.md, "Several nodes"); ``__cause__`` is the underlying
    exception, if any. What was asked: ``method`` and ``node`` (the URL
    sent to), ``statement`` (its first 200 characters; a batch's first
    statement), ``idempotency_key`` (the key sent, if any) — each ``None``
    for an error raised before sending. ``retryable`` says whether the
    call may be sent again: a network error, a timeout, ``unavailable``
    or ``internal``. Catch a subclass to handle one kind: ``except
    fenecdb.Unmet:``."""

    method: Optional[str] = None
    node: Optional[str] = None
    statement: Optional[str] = None
    idempotency_key: Optional[str] = None

    def __init__(
        self, message: str, *, status: int = 0, code: str = "", at: Optional[int] = None, leader: Optional[str] = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.at = at
        self.leader = leader

    @property
    def retryable(self) -> bool:
        """Whether the call met a fault that sending again may get past
        (a proxy's 502, 503 or 504 too)."""
        return self.code in RETRYABLE_CODES or (self.code == "unexpected" and self.status in (502, 503, 504))

    def __str__(self) -> str:
        where = "" if self.at is None else f", statement {self.at}"
        status = f"{self.status} " if self.status else ""
        return f"{self.message} ({status}{self.code or 'error'}{where})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status}, code={self.code!r}, at={self.at!r})"


class ConnectionFailed(FenecError):
    """``network``: the server could not be reached or the connection broke
    (refused, reset, no such host); the message names host:port and why.
    (``NetworkError`` is its older name.)"""


class TimedOut(ConnectionFailed, TimeoutError):
    """``timeout``: no answer in time; the message says which timeout and
    how long it was. Also a builtin :class:`TimeoutError`. (``Timeout`` is
    its older name.)"""


class StatusError(FenecError):
    """The server answered, with an error: ``status`` and ``code`` say
    which (a subclass per code: :class:`fenecdb.Unmet`, …)."""


class UnexpectedAnswer(StatusError):
    """``unexpected``: an answer that is not the API's JSON — a proxy's 502
    with an HTML page, say; the message has the status and the start of the
    body."""


NetworkError = ConnectionFailed
"""The older name of :class:`ConnectionFailed`."""

Timeout = TimedOut
"""The older name of :class:`TimedOut`."""
