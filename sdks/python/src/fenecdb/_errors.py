"""One error type, :class:`FenecError`, for everything a call can fail with
(docs/sdks.md, "Errors"): the server's refusals (a subclass per
``code`` of openapi.yaml, generated into ``_generated.py``) and three codes
of the client's own — ``network``, ``timeout`` and ``unexpected``. httpx's
exceptions never escape; they are the ``__cause__``."""

from __future__ import annotations

from typing import Optional


class FenecError(Exception):
    """A call that failed.

    ``status`` is the HTTP status (0 when there was no answer), ``code`` the
    kind of error (openapi.yaml's codes — ``"unmet"``, ``"conflict"``, … —
    or ``"network"``, ``"timeout"``, ``"unexpected"``), ``message`` what is
    wrong and where, ``at`` the 0-based statement of a ``/batch`` that was
    refused (else ``None``), ``leader`` the leader's URL a cluster node's
    403 ``forbidden`` named in its ``Fenec-Leader`` header (else ``None``;
    docs/sdks.md, "Several nodes"); ``__cause__`` is the underlying
    exception, if any. Catch a subclass to handle one kind: ``except
    fenecdb.Unmet:``."""

    def __init__(
        self, message: str, *, status: int = 0, code: str = "", at: Optional[int] = None, leader: Optional[str] = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.at = at
        self.leader = leader

    def __str__(self) -> str:
        where = "" if self.at is None else f", statement {self.at}"
        status = f"{self.status} " if self.status else ""
        return f"{self.message} ({status}{self.code or 'error'}{where})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status}, code={self.code!r}, at={self.at!r})"


class NetworkError(FenecError):
    """``network``: the server could not be reached or the connection broke
    (refused, reset, no such host); the message names host:port and why."""


class Timeout(FenecError, TimeoutError):
    """``timeout``: no answer in time; the message says which timeout and
    how long it was. Also a builtin :class:`TimeoutError`."""


class UnexpectedAnswer(FenecError):
    """``unexpected``: an answer that is not the API's JSON — a proxy's 502
    with an HTML page, say; the message has the status and the start of the
    body."""
