"""The examples' worker loops, four at a time (threads, then asyncio tasks),
drain 500 jobs enqueued while their claims are held: every job is run once
and acked once."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import List

import fenecdb
from fenecdb import expr

from .conftest import JOBS, Server

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
JOB_COUNT = 500
WORKERS = 4


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def enqueue(db: fenecdb.Client) -> List[str]:
    """Enqueues the jobs, 50 a statement; answers their addresses."""
    to = [f"u{i}@example.com" for i in range(JOB_COUNT)]
    jobs = db.collection("jobs")
    for i in range(0, JOB_COUNT, 50):
        jobs.insert([{"payload": {"to": t}, "run_at": expr("now()"), "attempts": 0} for t in to[i : i + 50]])
    return to


def check_drained(db: fenecdb.Client, sent: List[str], to: List[str]) -> None:
    twice = [t for t, n in Counter(sent).items() if n > 1]
    assert not twice, f"run more than once: {twice[:5]}"
    assert sorted(sent) == sorted(to)
    assert db.collection("jobs").count() == 0  # each acked: an ack deletes it


def test_threads_drain(server: Server) -> None:
    worker = example("worker")
    sent: List[str] = []
    lock = threading.Lock()

    def send(to: str) -> None:
        with lock:
            sent.append(to)

    stop = threading.Event()
    clients = [fenecdb.connect(server.url) for _ in range(WORKERS)]
    clients[0].query(JOBS)
    threads = [threading.Thread(target=worker.work, args=(c, send), kwargs={"wait": 2, "stop": stop}) for c in clients]
    for t in threads:
        t.start()
    try:
        server.until_held(WORKERS)
        to = enqueue(clients[0])
        deadline = time.monotonic() + 60
        while len(sent) < JOB_COUNT and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not any(t.is_alive() for t in threads), "a worker did not stop"
    check_drained(clients[0], sent, to)
    for c in clients:
        c.close()


def test_tasks_drain(server: Server) -> None:
    worker = example("worker_async")
    sent: List[str] = []

    async def run() -> None:
        all_sent = asyncio.Event()

        async def send(to: str) -> None:
            sent.append(to)
            if len(sent) >= JOB_COUNT:
                all_sent.set()

        async with fenecdb.connect_async(server.url) as db:
            await db.query(JOBS)
            tasks = [asyncio.ensure_future(worker.work(db, send)) for _ in range(WORKERS)]
            try:
                await asyncio.to_thread(server.until_held, WORKERS)
                with fenecdb.connect(server.url) as sync_db:
                    to = await asyncio.to_thread(enqueue, sync_db)
                await asyncio.wait_for(all_sent.wait(), 60)
                await asyncio.sleep(0.2)  # the last acks
                await asyncio.to_thread(server.until_held, WORKERS)  # back to waiting
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.to_thread(server.until_held, 0)  # cancelled: given up at the server
        with fenecdb.connect(server.url) as sync_db:
            check_drained(sync_db, sent, to)

    asyncio.run(run())
