"""The job queue's worker (docs/queues.md, "A worker"), with the asyncio
client: claim a batch -- held at the server until there is one -- run each
job, and ack it or fail it. Cancelling a worker's task gives its held claim
up at once.

    FENEC_URL=http://127.0.0.1:8080 FENEC_TOKEN='a worker token' python examples/worker_async.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from typing import Awaitable, Callable

import fenecdb
from fenecdb import expr, inc, raw


async def send(to: str) -> None:
    """The work."""


async def work(db: fenecdb.AsyncClient, send: Callable[[str], Awaitable[None]] = send, *, wait: float = 30) -> None:
    """Take jobs from ``jobs`` and run each with ``send``, until the task is
    cancelled."""
    jobs = db.collection("jobs")
    me = f"w-{uuid.uuid4()}"
    while True:
        owner = f"{me}:{time.time_ns() // 1_000_000}"
        claimed = (
            await jobs.where(raw("run_at <= now()"))
            .order("run_at")
            .limit(10)
            .update(
                {"owner": owner, "run_at": expr("now() + ?", 30000), "attempts": inc(1)},
                returning=True,
                wait=wait,
            )
        )
        for job in claimed:
            try:
                await send(job["payload"]["to"])
                await jobs.where("id", job["id"]).where("owner", owner).delete(require=1)
            except Exception:
                backoff = 1000 * 2 ** job["attempts"]
                # Unmet: the lease lapsed and another worker has the job now.
                with contextlib.suppress(fenecdb.FenecError):
                    await (
                        jobs.where("id", job["id"])
                        .where("owner", owner)
                        .update(
                            {"owner": None, "run_at": expr("now() + ?", backoff)},
                            require=1,
                        )
                    )


async def main() -> None:
    """Four workers on one connection pool."""
    url = os.environ.get("FENEC_URL", "http://127.0.0.1:8080")
    async with fenecdb.connect_async(url, token=os.environ.get("FENEC_TOKEN")) as db:
        await asyncio.gather(*(work(db) for _ in range(4)))


if __name__ == "__main__":
    asyncio.run(main())
