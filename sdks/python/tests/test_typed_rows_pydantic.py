"""Typed rows with a pydantic model: ``db.from_("jobs", Model)`` reads
rows validated into the model and writes a model's dump, against a real
``fenec serve``. pydantic is a test dependency only (the ``test`` extra);
the SDK does not import it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

import pytest
from pydantic import BaseModel, ValidationError

import fenecdb

from .conftest import JOBS, Server

WHEN = datetime(2026, 5, 3, 9, 20, tzinfo=timezone.utc)


class Job(BaseModel):
    id: int
    payload: Dict[str, Any]
    run_at: datetime
    attempts: int
    owner: Optional[str] = None


class NewJob(BaseModel):
    payload: Dict[str, Any]
    run_at: datetime
    attempts: int = 0


class OwnedJob(BaseModel):
    id: int
    owner: str


def test_pydantic_reads_and_inserts(server: Server) -> None:
    with fenecdb.connect(server.url) as db:
        db.query(JOBS)
        jobs = db.from_("jobs", Job)
        assert jobs.insert([NewJob(payload={"to": "a"}, run_at=WHEN), NewJob(payload={"to": "b"}, run_at=WHEN, attempts=2)]) == 2
        got = jobs.order("id").rows()
        assert [type(j) for j in got] == [Job, Job]
        assert [(j.id, j.payload, j.attempts, j.owner) for j in got] == [(1, {"to": "a"}, 0, None), (2, {"to": "b"}, 2, None)]
        assert got[0].run_at == WHEN  # written as UTC text, read back by the field's type
        first = jobs.where("id", 2).first()
        assert first is not None and first.attempts == 2
        # A row the model does not accept is pydantic's error, naming the field.
        with pytest.raises(ValidationError, match="owner"):
            db.from_("jobs", OwnedJob).rows()
        assert jobs.where("id", 1).untyped().update({"owner": "w1"}) == 1
        owned = db.from_("jobs", OwnedJob).where("owner", "w1").rows()
        assert [(o.id, o.owner) for o in owned] == [(1, "w1")]


def test_pydantic_async(server: Server) -> None:
    async def main() -> List[Job]:
        async with fenecdb.connect_async(server.url) as db:
            await db.query(JOBS)
            jobs = db.from_("jobs", Job)
            await jobs.insert(NewJob(payload={"to": "c"}, run_at=WHEN))
            return await jobs.rows()

    (job,) = asyncio.run(main())
    assert isinstance(job, Job) and job.payload == {"to": "c"} and job.run_at == WHEN
