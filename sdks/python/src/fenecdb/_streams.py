"""The connections the clients' httpx transports run over for a plain
``http://`` node: httpcore's own HTTP/1.1 and connection pool, on network
streams that cost less CPU per request than httpcore's defaults.

A worker is CPU-bound on one core (docs/workers.md, the figure), and a
request's parts showed up in its profile: httpcore writes a request's head
and body in two ``send`` calls, each a trip through the kernel's loopback
path; on asyncio its anyio stream opens cancel scopes around every read
and write, and answers "is this pooled connection still open?" — asked of
every pooled connection on every request — by building a dict of the
socket's addresses. Here a request's writes are held until its first read
and sent in one call, and the asyncio stream reads from a plain
``asyncio.Protocol``. On asyncio the pool's connections also leave out
httpcore's anyio locks (:class:`AsyncPool`). TLS and proxies keep httpx's
own transport."""

from __future__ import annotations

import asyncio
import typing
from collections import deque
from types import TracebackType
from typing import Any, Deque, Iterable, List, Optional, Type

import httpcore

FLUSH_AT = 64 * 1024
"""Bytes held before they are sent anyway (a large batch's body)."""

SocketOption = Any


class _Protocol(asyncio.Protocol):
    """A connection's bytes as they arrive, and one reader waiting."""

    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.chunks: Deque[bytes] = deque()
        self.closed = False
        self.error: Optional[BaseException] = None
        self.waiter: "Optional[asyncio.Future[None]]" = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self._wake()

    def eof_received(self) -> Optional[bool]:
        self.closed = True
        self._wake()
        return None  # the transport closes itself

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        self.error = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _late(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_exception(httpcore.ReadTimeout("timed out reading the answer"))


class AsyncStream(httpcore.AsyncNetworkStream):
    """One connection on asyncio, for httpcore."""

    def __init__(self, protocol: _Protocol) -> None:
        self._protocol = protocol
        self._held: List[bytes] = []
        self._held_bytes = 0

    def _flush(self) -> None:
        if not self._held:
            return
        data = b"".join(self._held)
        self._held, self._held_bytes = [], 0
        transport = self._protocol.transport
        if transport is None or self._protocol.closed or transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        transport.write(data)

    async def read(self, max_bytes: int, timeout: Optional[float] = None) -> bytes:
        self._flush()
        p = self._protocol
        if not p.chunks and not p.closed:
            loop = asyncio.get_running_loop()
            waiter = p.waiter = loop.create_future()
            timer = None if timeout is None else loop.call_later(timeout, _late, waiter)
            try:
                await waiter
            finally:
                p.waiter = None
                if timer is not None:
                    timer.cancel()
        if p.chunks:
            data = p.chunks.popleft()
            if len(data) > max_bytes:
                p.chunks.appendleft(data[max_bytes:])
                data = data[:max_bytes]
            return data
        if p.error is not None:
            raise httpcore.ReadError(str(p.error)) from p.error
        return b""

    async def write(self, buffer: bytes, timeout: Optional[float] = None) -> None:
        if not buffer:
            return
        self._held.append(buffer)
        self._held_bytes += len(buffer)
        if self._held_bytes >= FLUSH_AT:
            self._flush()

    async def aclose(self) -> None:
        self._held, self._held_bytes = [], 0
        if self._protocol.transport is not None:
            self._protocol.transport.close()

    def get_extra_info(self, info: str) -> Any:
        p = self._protocol
        if info == "is_readable":
            return p.closed or bool(p.chunks)
        if p.transport is None:
            return None
        if info == "socket":
            return p.transport.get_extra_info("socket")
        if info == "client_addr":
            return p.transport.get_extra_info("sockname")
        if info == "server_addr":
            return p.transport.get_extra_info("peername")
        return None


def _options(sock: Any, options: Optional[Iterable[SocketOption]]) -> None:
    if sock is None:
        return
    for option in options or ():
        sock.setsockopt(*option)


class AsyncBackend(httpcore.AsyncNetworkBackend):
    """Plain TCP connections on asyncio (no TLS: an ``https://`` node keeps
    httpx's own transport)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: Optional[float] = None,
        local_address: Optional[str] = None,
        socket_options: Optional[Iterable[SocketOption]] = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = None if local_address is None else (local_address, 0)
        try:
            made = loop.create_connection(_Protocol, host, port, local_addr=local)
            transport, protocol = await (made if timeout is None else asyncio.wait_for(made, timeout))
        except asyncio.TimeoutError as e:
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from e
        except OSError as e:
            raise httpcore.ConnectError(str(e)) from e
        _options(transport.get_extra_info("socket"), socket_options)
        return AsyncStream(protocol)

    async def connect_unix_socket(
        self, path: str, timeout: Optional[float] = None, socket_options: Optional[Iterable[SocketOption]] = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("a unix socket is not a Fenec node")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Unlocked:
    """In place of httpcore's lock around an HTTP/1.1 connection's state
    on asyncio: nothing to hold. The pool hands a connection to one
    request at a time, and no section that lock guards awaits anything
    (the stream's close does not), so no other task can run inside one.
    httpcore's anyio lock yields to the event loop and opens a cancel scope
    on every acquire: three times a request, more than the rest of the
    connection's own work."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        return None


class _AsyncConnection(httpcore.AsyncHTTPConnection):
    """httpcore's connection to a plain ``http://`` node — connected by
    httpcore, speaking httpcore's HTTP/1.1 — without its locks (see
    :class:`_Unlocked`)."""

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if self._connection is None:
            try:
                stream = await self._connect(request)
            except BaseException:
                self._connect_failed = True
                raise
            http11 = httpcore.AsyncHTTP11Connection(origin=self._origin, stream=stream, keepalive_expiry=self._keepalive_expiry)
            http11._state_lock = _Unlocked()  # type: ignore[assignment]
            self._connection = http11
        return await self._connection.handle_async_request(request)


class _Assigned:
    """In place of httpcore's event that tells a queued request it has a
    connection: an asyncio future's flag. httpcore's own asks which async
    library runs and makes an anyio event, on every request's assignment."""

    def __init__(self) -> None:
        self._set = False
        self._waiter: "Optional[asyncio.Future[None]]" = None

    def set(self) -> None:
        self._set = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self, timeout: Optional[float] = None) -> None:
        if self._set:
            return
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._waiter), timeout)
        except asyncio.TimeoutError as e:
            raise httpcore.PoolTimeout("no connection of the pool came free in time") from e


class AsyncPool(httpcore.AsyncConnectionPool):
    """httpcore's pool, of :class:`_AsyncConnection` (plain TCP: no proxy,
    no TLS, HTTP/1.1), whose queued requests wait on :class:`_Assigned`."""

    def _assign_requests_to_connections(self) -> List[httpcore.AsyncConnectionInterface]:
        for request in getattr(self, "_requests", ()):
            if request.connection is None and not isinstance(getattr(request, "_connection_acquired", None), _Assigned):
                request._connection_acquired = _Assigned()
        return super()._assign_requests_to_connections()

    def create_connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        return _AsyncConnection(
            origin=origin,
            keepalive_expiry=self._keepalive_expiry,
            network_backend=self._network_backend,
        )

    async def _close_connections(self, closing: List[httpcore.AsyncConnectionInterface]) -> None:
        if closing:  # httpcore opens a cancel scope even for none
            await super()._close_connections(closing)


class Stream(httpcore.NetworkStream):
    """httpcore's blocking stream, its writes held until the next read."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream
        self._held: List[bytes] = []
        self._held_bytes = 0

    def _flush(self, timeout: Optional[float]) -> None:
        if self._held:
            data = b"".join(self._held)
            self._held, self._held_bytes = [], 0
            self._stream.write(data, timeout)

    def read(self, max_bytes: int, timeout: Optional[float] = None) -> bytes:
        self._flush(timeout)
        return self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: Optional[float] = None) -> None:
        if not buffer:
            return
        self._held.append(buffer)
        self._held_bytes += len(buffer)
        if self._held_bytes >= FLUSH_AT:
            self._flush(timeout)

    def close(self) -> None:
        self._held, self._held_bytes = [], 0
        self._stream.close()

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class Backend(httpcore.NetworkBackend):
    """httpcore's blocking TCP connections, each a :class:`Stream`."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: Optional[float] = None,
        local_address: Optional[str] = None,
        socket_options: Optional[Iterable[SocketOption]] = None,
    ) -> httpcore.NetworkStream:
        return Stream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: Optional[float] = None, socket_options: Optional[Iterable[SocketOption]] = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("a unix socket is not a Fenec node")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


SyncPool = httpcore.ConnectionPool
"""The blocking client's pool (the name :class:`AsyncPool` takes in the
client unasync writes): httpcore's own, whose locks are plain thread locks."""
