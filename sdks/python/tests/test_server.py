"""Claims held with ``wait`` against a real ``fenec serve --clock manual``:
woken by a write, by time, and given up when an asyncio task is cancelled
(the rest of the client: tests/_async/test_client.py)."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

import fenecdb
from fenecdb import _calls as calls
from fenecdb import _generated as api
from fenecdb import expr, inc, raw

from .conftest import JOBS, Server, StartServer

START = datetime(2026, 5, 3, 9, 20, tzinfo=timezone.utc)
"""The manual clock's first moment."""


@pytest.fixture
def db(server: Server) -> fenecdb.Client:
    client = fenecdb.connect(server.url)
    client.query(JOBS)
    return client


def claim(db: fenecdb.Client, owner: str, wait: float = 0) -> "list[fenecdb.Row]":
    return (
        db.collection("jobs")
        .where(raw("run_at <= now()"))
        .order("run_at")
        .limit(10)
        .update({"owner": owner, "run_at": expr("now() + ?", 30000), "attempts": inc(1)}, returning=True, wait=wait)
    )


def test_held_claim_woken_by_a_write(server: Server, db: fenecdb.Client) -> None:
    def enqueue() -> None:
        server.until_held(1)
        with fenecdb.connect(server.url) as other:
            other.collection("jobs").insert({"payload": {"to": "ada"}, "run_at": expr("now()"), "attempts": 0})

    t = threading.Thread(target=enqueue)
    t.start()
    began = time.monotonic()
    (job,) = claim(db, "w1", wait=10)
    t.join()
    assert job["payload"] == {"to": "ada"} and job["owner"] == "w1" and job["attempts"] == 1
    assert time.monotonic() - began < 5


def test_held_claim_woken_by_time(server: Server, db: fenecdb.Client) -> None:
    db.collection("jobs").insert({"run_at": expr("now() + ?", 60000), "attempts": 0})

    def move_clock() -> None:
        server.until_held(1)
        server.advance(60000)

    t = threading.Thread(target=move_clock)
    t.start()
    (job,) = claim(db, "w1", wait=10)
    t.join()
    assert job["id"] == 1 and job["run_at"] == START + timedelta(seconds=90)


def test_cancelling_a_held_claim_frees_it(server: Server, db: fenecdb.Client) -> None:
    async def run() -> None:
        async with fenecdb.connect_async(server.url) as adb:
            jobs = adb.collection("jobs")
            ghost = jobs.where(raw("run_at <= now()")).order("run_at").limit(1)
            held = asyncio.ensure_future(ghost.update({"owner": "ghost"}, returning=True, wait=30))
            await asyncio.to_thread(server.until_held, 1)
            held.cancel()
            with pytest.raises(asyncio.CancelledError):
                await held
            await asyncio.to_thread(server.until_held, 0)  # given up at the server too

    asyncio.run(run())
    # A job enqueued now goes to a live claim, not to the one given up.
    db.collection("jobs").insert({"run_at": expr("now()"), "attempts": 0})
    (job,) = claim(db, "alive")
    assert job["owner"] == "alive" and job["attempts"] == 1


def test_every_code_maps_to_its_class(start_server: StartServer) -> None:
    """The server's answers, each mapped to the class generated for its
    code (the codes a test can make a server answer without a policy)."""
    server = start_server("--max-body", "200")
    with fenecdb.connect(server.url) as db:
        db.query(JOBS)
        with pytest.raises(fenecdb.TooLarge) as big:
            db.from_("jobs").insert({"error": "x" * 300})
        assert (big.value.status, big.value.code) == (413, "too_large")
        # No call of the client sends a GET to /query: ask by hand, map the answer.
        with httpx.Client(base_url=server.url) as http:
            reply = api._reply(http.get("/query"), text=False)
        call = db._settings.call(api.QUERY)
        with pytest.raises(fenecdb.MethodNotAllowed) as wrong:
            calls.answered(call, reply)
        assert (wrong.value.status, wrong.value.code) == (405, "method_not_allowed")
    for code, cls in api.ERRORS.items():
        assert cls.__name__ == "".join(w.title() for w in code.split("_")) and issubclass(cls, fenecdb.FenecError)
        assert getattr(fenecdb, cls.__name__) is cls


def test_namespace_is_clean() -> None:
    assert sorted(n for n in dir(fenecdb) if not n.startswith("_") and n not in fenecdb.__all__) == []
    assert all(hasattr(fenecdb, n) for n in fenecdb.__all__)


def test_health_of_a_failed_store(start_server: StartServer, tmp_path: Path) -> None:
    """A server whose store failed (its disk full: a small tmpfs this test
    mounts, as server/httpapi/diskfull_linux_test.go does) answers health
    503 with the health document; ``health()`` answers that document, as
    every call that reached the server does, rather than raising."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here (it needs root): {mounted.stderr.strip()}")
    try:
        (disk / "ballast").write_bytes(bytes(6 << 20))
        server = start_server("--file", str(disk / "f.db"))
        try:
            with fenecdb.connect(server.url) as db:
                db.query("create collection c (pad text)")
                assert db.health() == {"ok": True, "store": "ok"}
                pad = "x" * (16 << 10)
                for _ in range(1000):
                    try:
                        db.query("insert c {pad: $1}", [pad])
                    except fenecdb.Unavailable:
                        break
                else:
                    raise AssertionError("1000 inserts of 16 KB did not fill an 8 MB tmpfs (6 MB of it ballast)")
                health = db.health()
                assert (health["ok"], health["store"]) == (False, "failed")
                assert "full" in health.get("error", ""), health

            async def asynchronously() -> api.Health:
                async with fenecdb.connect_async(server.url) as adb:
                    return await adb.health()

            assert asyncio.run(asynchronously())["store"] == "failed"
        finally:
            server.stop()
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_instead_of_redis(server: Server) -> None:
    """if_absent writes once; upsert and inc count from nothing; near answers
    nearest first (docs/redis.md)."""
    db = fenecdb.connect(server.url)
    db.query("create collection counters (key text @unique, n int)")
    db.query("create collection places (name text, at geo @geo)")
    counters = db.collection("counters")
    assert counters.if_absent().insert({"key": "a", "n": 5}) == 1
    assert counters.if_absent().insert({"key": "a", "n": 9}) == 0
    assert (counters.where("key", "a").first() or {})["n"] == 5
    hit = counters.upsert({"n": inc(1)})
    for _ in range(3):
        assert hit.insert({"key": "b"}) == 1  # written with n null, then coalesce(n, 0) + 1 twice
    assert (counters.where("key", "b").first() or {})["n"] == 2
    counters.upsert({"n": expr("n + new.n")}).insert({"key": "a", "n": 10})
    assert (counters.where("key", "a").first() or {})["n"] == 15

    places = db.collection("places")
    places.insert([{"name": "far", "at": [10, 10]}, {"name": "near", "at": [1, 1]}, {"name": "mid", "at": [5, 5]}, {"name": "none"}])
    assert [r["name"] for r in places.near("at", [0, 0]).select("name").rows()] == ["near", "mid", "far"]
    assert [r["name"] for r in places.near("at", [9, 9], exact=True).limit(2).select("name").rows()] == ["far", "mid"]
    taken = places.near("at", (6, 6)).limit(1).update({"name": "taken"}, returning=["name"])
    assert [r["name"] for r in taken] == ["taken"]
