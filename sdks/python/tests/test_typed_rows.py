"""Typed rows: ``db.from_("jobs", Job)`` with a TypedDict or a dataclass,
blocking and asyncio, against a real ``fenec serve``; the statements sent
are the builder's, unchanged."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional

import pytest

if sys.version_info >= (3, 11):
    from typing import TypedDict
else:  # pragma: no cover
    from typing_extensions import TypedDict

import fenecdb
from fenecdb import expr

from .conftest import JOBS, Server


class JobDict(TypedDict):
    id: int
    payload: Dict[str, Any]
    run_at: datetime
    owner: Optional[str]
    attempts: int
    error: Optional[str]


@dataclass
class Job:
    id: int
    payload: Dict[str, Any]
    run_at: datetime
    attempts: int
    owner: Optional[str] = None
    tags: List[str] = field(default_factory=list)


@dataclass
class NewJob:
    payload: Dict[str, Any]
    run_at: Any
    attempts: int = 0


def test_typed_reads_and_inserts(server: Server) -> None:
    with fenecdb.connect(server.url) as db:
        db.query(JOBS)
        jobs = db.from_("jobs", Job)
        assert jobs.insert([NewJob({"to": "a"}, expr("now()")), NewJob({"to": "b"}, expr("now()"), 2)]) == 2
        got = jobs.where("attempts", ">=", 0).order("id").rows()
        assert [type(j) for j in got] == [Job, Job]
        assert [(j.id, j.payload, j.attempts, j.owner, j.tags) for j in got] == [
            (1, {"to": "a"}, 0, None, []), (2, {"to": "b"}, 2, None, [])
        ]
        assert isinstance(got[0].run_at, datetime) and got[0].run_at.tzinfo is not None  # decoded by field type
        first = jobs.where("id", 2).first()
        assert first is not None and first.payload == {"to": "b"}
        assert jobs.where("id", 3).first() is None
        assert jobs.count() == 2
        as_dicts = db.from_("jobs", JobDict).order("id").rows()
        assert [(r["id"], r["attempts"]) for r in as_dicts] == [(1, 0), (2, 2)]
        # The untyped twin writes with the same conditions.
        assert jobs.where("id", 1).untyped().update({"owner": "w1"}) == 1
        # The statements are the builder's: a typed query renders as the plain one.
        assert jobs.where("id", 1).render_rows() == db.from_("jobs").where("id", 1).render_rows()


def test_a_row_lacking_a_field_names_it(server: Server) -> None:
    with fenecdb.connect(server.url) as db:
        db.query(JOBS)
        db.from_("jobs").insert({"payload": {}, "attempts": 0})
        with pytest.raises(TypeError, match="run_at"):
            db.from_("jobs", Job).select("id", "payload", "attempts").rows()


def test_typed_async(server: Server) -> None:
    async def main() -> List[Job]:
        async with fenecdb.connect_async(server.url) as db:
            await db.query(JOBS)
            jobs = db.from_("jobs", Job)
            await jobs.insert(NewJob({"to": "c"}, expr("now()")))
            return await jobs.rows()

    (job,) = asyncio.run(main())
    assert isinstance(job, Job) and job.payload == {"to": "c"}


def test_a_row_type_is_checked_at_once() -> None:
    db = fenecdb.connect("http://typed.invalid")
    with pytest.raises(TypeError, match="TypedDict, a dataclass or a pydantic model"):
        db.from_("jobs", int)
