"""The job queue's worker (docs/queues.md, "A worker"), with the blocking
client: claim a batch -- held at the server until there is one -- run each
job, and ack it or fail it.

    FENEC_URL=http://127.0.0.1:8080 FENEC_TOKEN='a worker token' python examples/worker.py
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from typing import Callable, Optional

import fenecdb
from fenecdb import expr, inc, raw


def send(to: str) -> None:
    """The work."""


def work(
    db: fenecdb.Client,
    send: Callable[[str], None] = send,
    *,
    wait: float = 30,
    stop: Optional[threading.Event] = None,
) -> None:
    """Take jobs from ``jobs`` and run each with ``send`` until ``stop`` is
    set (it is seen once a claim is answered: at most ``wait`` seconds on)."""
    jobs = db.collection("jobs")
    me = f"w-{uuid.uuid4()}"
    while stop is None or not stop.is_set():
        owner = f"{me}:{time.time_ns() // 1_000_000}"
        claimed = (
            jobs.where(raw("run_at <= now()"))
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
                send(job["payload"]["to"])
                jobs.where("id", job["id"]).where("owner", owner).delete(require=1)
            except Exception:
                backoff = 1000 * 2 ** job["attempts"]
                # Unmet: the lease lapsed and another worker has the job now.
                with contextlib.suppress(fenecdb.FenecError):
                    jobs.where("id", job["id"]).where("owner", owner).update(
                        {"owner": None, "run_at": expr("now() + ?", backoff)},
                        require=1,
                    )


if __name__ == "__main__":
    url = os.environ.get("FENEC_URL", "http://127.0.0.1:8080")
    with fenecdb.connect(url, token=os.environ.get("FENEC_TOKEN")) as db:
        work(db)
