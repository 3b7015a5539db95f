"""The change stream's consumer against a real ``fenec serve``, where two
calls at once matter (docs/changes.md, "The change stream"): a second read
under a name while one is held is ConsumerBusy, and a held read returns as
soon as a write lands. On threads (``Client``) and on asyncio
(``AsyncClient``)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import List

import pytest

import fenecdb
from fenecdb import ChangeBatch

from .conftest import Server

HELD = 20.0
"""Seconds the first read may be held: far longer than the test takes."""


def _busy_then_write(db: fenecdb.Client) -> None:
    """Reads under "mailer" until the server says another read runs (the
    held one), then writes the change that wakes it."""
    k = db.consumer("mailer", "msgs")
    deadline = time.monotonic() + 15
    while True:
        try:
            early = k.read(wait=0)
        except fenecdb.ConsumerBusy as e:
            assert (e.status, e.code) == (409, "consumer_busy")
            break
        assert early["changes"] == []  # the held read is not there yet
        assert time.monotonic() < deadline, "the held read never showed up"
        time.sleep(0.01)
    db.from_("msgs").insert({"text": "wake"})


def test_held_read_is_busy_to_a_second_and_woken_by_a_write(server: Server) -> None:
    with fenecdb.connect(server.url) as db:
        db.query("create collection msgs (text text)")
        got: List[ChangeBatch] = []
        began = time.monotonic()
        held = threading.Thread(target=lambda: got.append(db.consumer("mailer", "msgs").read(wait=HELD)))
        held.start()
        _busy_then_write(db)
        held.join(HELD + 10)
        assert time.monotonic() - began < HELD / 2
        [batch] = got
        assert [(c["op"], c["id"]) for c in batch["changes"]] == [("put", 1)]
        # Not acknowledged: the next read has it again, and no longer busy.
        assert db.consumer("mailer", "msgs").read() == batch


@pytest.mark.anyio
async def test_held_read_async(server: Server, anyio_backend: str) -> None:
    async with fenecdb.connect_async(server.url) as db:
        await db.query("create collection msgs (text text)")
        began = time.monotonic()
        held = asyncio.ensure_future(db.consumer("mailer", "msgs").read(wait=HELD))
        with fenecdb.connect(server.url) as other:
            await asyncio.get_running_loop().run_in_executor(None, _busy_then_write, other)
        batch = await asyncio.wait_for(held, HELD + 10)
        assert time.monotonic() - began < HELD / 2
        assert [(c["op"], c["id"]) for c in batch["changes"]] == [("put", 1)]
        # Not acknowledged: the next read has it again.
        assert await db.consumer("mailer", "msgs").read() == batch
