"""The entry points: ``connect`` and ``connect_async``."""

from __future__ import annotations

from typing import Optional

from ._async.client import AsyncClient
from ._calls import DEFAULT_TIMEOUT
from ._sync.client import Client


def connect(url: str, *, token: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT) -> Client:
    """A blocking client of the Fenec server at ``url`` (``http(s)://host[:port]``,
    checked now: a ValueError names what is wrong).

    ``token`` is sent as ``Authorization: Bearer <token>``; ``timeout`` is the
    seconds a call may take (default 30; ``None``: no limit), and a call
    sent with ``wait=`` may take that much longer."""
    return Client(url, token=token, timeout=timeout)


def connect_async(url: str, *, token: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT) -> AsyncClient:
    """An asyncio client of the Fenec server at ``url``; use it with
    ``async with``. Arguments as :func:`connect`."""
    return AsyncClient(url, token=token, timeout=timeout)
