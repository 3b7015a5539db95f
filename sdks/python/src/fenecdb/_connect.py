"""The entry points: ``connect`` and ``connect_async``."""

from __future__ import annotations

from typing import Optional, Sequence, Union

from ._async.client import AsyncClient
from ._calls import DEFAULT_TIMEOUT, Verify
from ._sync.client import Client


def connect(
    url: Union[str, Sequence[str], None] = None,
    *,
    token: Optional[str] = None,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    verify: Verify = True,
) -> Client:
    """A blocking client of the Fenec server at ``url`` (``http(s)://host[:port]``,
    checked now: a ValueError names what is wrong) — or of a cluster's
    nodes: several URLs, comma-separated (``"http://a:8080,http://b:8080"``,
    so one environment variable holds them) or a sequence; the client
    follows the leader and finds another node when one is down
    (docs/sdks.md, "Several nodes").

    ``token`` is sent as ``Authorization: Bearer <token>``; ``timeout`` is the
    seconds a call may take (default 30; ``None``: no limit), and a call
    sent with ``wait=`` may take that much longer.

    ``verify`` checks an https server's certificate: ``True`` against the
    system's trusted CAs; a path, against the CAs of that PEM file (a CA of
    your own); an :class:`ssl.SSLContext` as made (to present a client
    certificate, ``ctx.load_cert_chain(...)``); ``False`` not at all. A
    certificate that fails the check fails the call with
    ``httpx.ConnectError`` naming ``CERTIFICATE_VERIFY_FAILED``.

    With no ``url``, it is read from ``FENEC_URL``, and the token, unless
    given, from ``FENEC_TOKEN``; FENEC_URL unset is a ValueError. Every
    request names the SDK and Python in its User-Agent
    (``fenecdb-python/0.1.0 python/3.11.7``)."""
    return Client(url, token=token, timeout=timeout, verify=verify)


def connect_async(
    url: Union[str, Sequence[str], None] = None,
    *,
    token: Optional[str] = None,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    verify: Verify = True,
) -> AsyncClient:
    """An asyncio client of the Fenec server at ``url``; use it with
    ``async with``. Arguments as :func:`connect`."""
    return AsyncClient(url, token=token, timeout=timeout, verify=verify)
