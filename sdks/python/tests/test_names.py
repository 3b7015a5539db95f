"""docs/sdks.md's "One word per idea" table, read for its Python column:
each name it gives is in the public API, the deprecated ones still work
and warn, and the shortest lease is 100 ms. Nothing here is sent."""

from __future__ import annotations

import inspect
import re
import threading
import warnings
from typing import Any, Dict, List

import pytest

import fenecdb

from .conftest import ROOT

SDKS = ROOT / "docs" / "sdks.md"


def table() -> Dict[str, str]:
    """The table's rows: idea → the Python cell (``the same`` resolved to
    the JS cell, as the table means it)."""
    text = SDKS.read_text()
    start = text.index("### One word per idea")
    rows: Dict[str, str] = {}
    header: List[str] = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header:
            header = cells
            continue
        row = dict(zip(header, cells))
        python = row["Python"]
        rows[row["idea"]] = row["JS/TS"] if python == "the same" else python
    return rows


def where(name: str) -> Any:
    """Where the public API has ``name``: the package, the builder, either
    worker (a method, or a parameter of its constructor)."""
    places = [fenecdb, fenecdb.Query, fenecdb.Worker, fenecdb.AsyncWorker]
    for p in places:
        if hasattr(p, name):
            return getattr(p, name)
    for w in (fenecdb.Worker, fenecdb.AsyncWorker):
        if name in inspect.signature(w).parameters:
            return inspect.signature(w).parameters[name]
    return None


def test_the_table_is_there() -> None:
    rows = table()
    assert {"the builder's type", "the worker's owner prefix", "run until the queue is empty"} <= set(rows)


def test_every_name_of_the_python_column_is_public() -> None:
    for idea, cell in table().items():
        for token in re.findall(r"`([^`]+)`", cell):
            name = re.match(r"[A-Za-z_]\w*", token)
            if name is None:
                continue  # "100 ms": checked below
            assert where(name.group(0)) is not None, f"{idea}: {name.group(0)} is not in fenecdb's public API"
            for typ in re.findall(r":\s*([A-Z]\w*)", token):
                assert hasattr(fenecdb, typ), f"{idea}: {typ} is not fenecdb.{typ}"


def test_raw_expr_inc_make_their_types() -> None:
    assert isinstance(fenecdb.raw("a = ?", 1), fenecdb.Raw)
    assert isinstance(fenecdb.expr("now()"), fenecdb.Expr)
    assert isinstance(fenecdb.inc(1), fenecdb.Inc)
    assert issubclass(fenecdb.Collection, fenecdb.Query) and issubclass(fenecdb.AsyncCollection, fenecdb.Query)


def test_the_shortest_lease_is_100_ms() -> None:
    assert "100 ms" in table()["the shortest lease"]
    db = fenecdb.connect("http://names.invalid")

    def handler(row: fenecdb.Row, cancel: threading.Event) -> None:
        return None

    async def ahandler(row: fenecdb.Row) -> None:
        return None

    adb = fenecdb.connect_async("http://names.invalid")
    fenecdb.Worker(db.from_("jobs"), handler, lease=0.1)
    fenecdb.AsyncWorker(adb.from_("jobs"), ahandler, lease=0.1)
    with pytest.raises(ValueError, match="100 ms"):
        fenecdb.Worker(db.from_("jobs"), handler, lease=0.099)
    with pytest.raises(ValueError, match="100 ms"):
        fenecdb.AsyncWorker(adb.from_("jobs"), ahandler, lease=0.099)


def test_deprecated_names_warn_and_work() -> None:
    """The names the table marks deprecated for Python (``owner``)."""
    deprecated = [
        re.match(r"\w+", t).group(0)  # type: ignore[union-attr]
        for cell in table().values()
        for t in re.findall(r"`([^`]+)` deprecated", cell)
    ]
    assert deprecated == ["owner"]
    db = fenecdb.connect("http://names.invalid")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        w = fenecdb.Worker(db.from_("jobs"), lambda row, cancel: None, owner="w-old")
    assert [type(g.message) for g in got] == [DeprecationWarning]
    assert w.owner_prefix == "w-old"


def test_on_error_takes_a_worker_error() -> None:
    assert fenecdb.OnError.__args__[0] is fenecdb.WorkerError  # type: ignore[attr-defined]
    e = fenecdb.WorkerError("lost_lease", 42, fenecdb.LostLease(42, "w-1:1", "ack"))
    assert (e.step, e.job_id) == ("lost_lease", 42) and e.__cause__ is e.cause
