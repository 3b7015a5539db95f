"""The entry points: ``connect`` and ``connect_async``."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

import httpx

from ._async.client import AsyncClient
from ._calls import DEFAULT_TIMEOUT, Verify
from ._sync.client import Client


def connect(
    url: Union[str, Sequence[str], None] = None,
    *,
    token: Optional[str] = None,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    verify: Verify = True,
    proxy: Optional[str] = None,
    headers: Optional[Mapping[str, str]] = None,
    transport: Optional[httpx.BaseTransport] = None,
    max_retries: int = 0,
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

    ``proxy`` is a proxy's URL (``http://proxy:3128``) every request goes
    through; ``headers`` are sent on every request (beside the SDK's
    User-Agent, which a ``User-Agent`` of them replaces); ``transport``
    replaces httpx's own (an ``httpx.HTTPTransport`` of your own, a
    ``MockTransport`` — then ``verify`` and ``proxy`` are the transport's).
    Both workers send through them.

    ``max_retries`` (0: none) retries a call that met a fault — a network
    error, a timeout, ``unavailable`` or ``internal`` — up to that many
    times, after an exponential delay with full jitter; a write is sent
    with an ``Idempotency-Key`` (one generated when the call gives none),
    so a retry of a write the server applied is answered as the first was
    and never applies twice (docs/http.md). The error a call raises names
    what was asked (``method``, ``node``, ``statement``,
    ``idempotency_key``) and says whether it was ``retryable``.

    With no ``url``, it is read from ``FENEC_URL``, and the token, unless
    given, from ``FENEC_TOKEN``; FENEC_URL unset is a ValueError. Every
    request names the SDK and Python in its User-Agent
    (``fenecdb-python/0.1.0 python/3.11.7``)."""
    return Client(
        url, token=token, timeout=timeout, verify=verify, proxy=proxy, headers=headers, transport=transport, max_retries=max_retries
    )


def connect_async(
    url: Union[str, Sequence[str], None] = None,
    *,
    token: Optional[str] = None,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    verify: Verify = True,
    proxy: Optional[str] = None,
    headers: Optional[Mapping[str, str]] = None,
    transport: Optional[httpx.AsyncBaseTransport] = None,
    max_retries: int = 0,
) -> AsyncClient:
    """An asyncio client of the Fenec server at ``url``; use it with
    ``async with``. Arguments as :func:`connect`."""
    return AsyncClient(
        url, token=token, timeout=timeout, verify=verify, proxy=proxy, headers=headers, transport=transport, max_retries=max_retries
    )
