"""The client against a real ``fenec serve --clock manual``: errors, tokens,
timestamps, idempotency, and claims held with ``wait``."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

import fenecdb
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


def test_errors(db: fenecdb.Client) -> None:
    jobs = db.collection("jobs")
    with pytest.raises(fenecdb.Unmet) as unmet:
        jobs.where("id", 1).where("owner", "w1").delete(require=1)
    assert (unmet.value.status, unmet.value.code, unmet.value.at) == (412, "unmet", None)
    assert "requires 1" in unmet.value.message
    with pytest.raises(fenecdb.NotFound) as nf:
        db.collection("jbos").rows()
    assert nf.value.status == 404
    with pytest.raises(fenecdb.BadRequest):
        db.query("get jobs where")
    db.query("create collection accounts (email text @unique)")
    accounts = db.collection("accounts")
    assert accounts.insert({"email": "ada@example.com"}) == 1
    with pytest.raises(fenecdb.Conflict) as conflict:
        accounts.insert({"email": "ada@example.com"})
    assert conflict.value.status == 409
    with pytest.raises(fenecdb.Conflict) as batch:
        db.batch([jobs.render_insert({"attempts": 0}), accounts.render_insert({"email": "ada@example.com"})])
    assert batch.value.at == 1
    assert jobs.count() == 0  # the batch left no trace
    with pytest.raises(fenecdb.BadRequest, match="Fenec-Wait"):
        claim(db, "w1", wait=31)
    with pytest.raises(fenecdb.BadRequest, match="Fenec-Wait"):
        db.query("put jobs {attempts: 0}", wait=1)


def test_token(start_server: StartServer) -> None:
    server = start_server("--token", "s3cret")
    with fenecdb.connect(server.url) as anonymous:
        assert anonymous.health() is True
        with pytest.raises(fenecdb.Unauthorized) as info:
            anonymous.collections()
        assert (info.value.status, info.value.code) == (401, "unauthorized")
    with fenecdb.connect(server.url, token="s3cret") as db:
        db.query(JOBS)
        assert [c["name"] for c in db.collections()] == ["jobs"]


def test_timestamps_and_batch(db: fenecdb.Client) -> None:
    jobs = db.collection("jobs")
    later = START + timedelta(hours=1, milliseconds=250)
    in_istanbul = later.astimezone(timezone(timedelta(hours=3)))
    assert jobs.insert([{"run_at": START, "attempts": 0}, {"run_at": in_istanbul}]) == 2
    rows = jobs.select("id", "run_at").order("id").rows()
    assert rows == [{"id": 1, "run_at": START}, {"id": 2, "run_at": later}]
    assert jobs.where("run_at", ">", START).first() == {
        "id": 2,
        "payload": None,
        "run_at": later,
        "owner": None,
        "attempts": None,
        "error": None,
    }
    assert db.batch(["get jobs count", jobs.where("id", 2).render_delete()]) == [[{"count": 2}], 1]
    assert jobs.where("id", "in", [1, 2]).count() == 1


def test_idempotency_key(db: fenecdb.Client) -> None:
    jobs = db.collection("jobs")
    jobs.insert([{"run_at": expr("now()"), "attempts": 0}] * 3)
    first = jobs.where(raw("run_at <= now()")).limit(2).update({"owner": "w1"}, returning=["id"], idempotency_key="c-1")
    again = jobs.where(raw("run_at <= now()")).limit(2).update({"owner": "w1"}, returning=["id"], idempotency_key="c-1")
    assert first == again == [{"id": 1}, {"id": 2}]
    with pytest.raises(fenecdb.KeyReused):
        jobs.where("id", 3).update({"owner": "w2"}, idempotency_key="c-1")


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


def test_held_claim_ends_empty(db: fenecdb.Client) -> None:
    began = time.monotonic()
    assert claim(db, "w1", wait=0.3) == []
    assert 0.25 < time.monotonic() - began < 5


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
