"""The errors a Fenec server answers, one class per ``code`` (docs/http.md)."""

from __future__ import annotations

from typing import Dict, Optional, Type

from . import _generated


class FenecError(Exception):
    """A request the server refused or failed.

    ``status`` is the HTTP status, ``code`` the server's kind of error
    (``"unmet"``, ``"conflict"``, …; empty when the answer was not Fenec's),
    ``at`` the 0-based statement of a ``/batch`` that was refused (else
    ``None``), and ``message`` what the server said is wrong, and where.
    Catch a subclass to handle one kind: ``except fenecdb.Unmet:``."""

    def __init__(self, message: str, *, status: int, code: str, at: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.at = at

    def __str__(self) -> str:
        where = "" if self.at is None else f", statement {self.at}"
        return f"{self.message} ({self.status} {self.code or 'error'}{where})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status}, code={self.code!r}, at={self.at!r})"


class BadRequest(FenecError):
    """400 ``bad_request``: a statement that does not parse or type-check, a
    missing parameter, a bad header or body."""


class Unauthorized(FenecError):
    """401 ``unauthorized``: the bearer token is missing, wrong or expired."""


class Forbidden(FenecError):
    """403 ``forbidden``: the token's rules refuse it, or a replica was asked to write."""


class NotFound(FenecError):
    """404 ``not_found``: an unknown collection or field (or route)."""


class MethodNotAllowed(FenecError):
    """405 ``method_not_allowed``: a route asked with a method it does not take."""


class Conflict(FenecError):
    """409 ``conflict``: a taken id or ``@unique`` value; nothing was written."""


class Unmet(FenecError):
    """412 ``unmet``: a ``require n`` was not met; nothing was written."""


class TooLarge(FenecError):
    """413 ``too_large``: the body is larger than the server's ``--max-body``."""


class KeyReused(FenecError):
    """422 ``key_reused``: the Idempotency-Key was used for another request."""


class KeyLimit(FenecError):
    """503 ``key_limit``: the server holds as many Idempotency-Keys as it may;
    the write was not run. Send it again once older keys expire."""


class Internal(FenecError):
    """500 ``internal``: a fault in the server."""


class Unavailable(FenecError):
    """503 ``unavailable``: the store failed, or the request was given up."""


class StatementTimeout(FenecError):
    """503 ``statement_timeout``: the statements ran past the server's ``--statement-timeout``; nothing was written."""


ERRORS: Dict[str, Type[FenecError]] = {code: globals()[name] for code, name in _generated.ERROR_CLASS_NAMES.items()}
"""Each error code the contract names, and its class."""


def error_for(status: int, body: object, text: str) -> FenecError:
    """The exception for a refused request: its class by the body's ``code``."""
    if isinstance(body, dict) and isinstance(body.get("error"), str) and isinstance(body.get("code"), str):
        at = body.get("at")
        cls = ERRORS.get(body["code"], FenecError)
        return cls(body["error"], status=status, code=body["code"], at=at if isinstance(at, int) else None)
    return FenecError(text.strip()[:500] or f"HTTP {status}", status=status, code="")
