"""Every conformance/cases/*.json page replays through the client against a
fresh ``fenec serve --clock manual`` (conformance/README.md)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Dict

import pytest

import fenecdb
from fenecdb._codec import timestamp_text

from .conftest import ROOT, StartServer

PAGES = sorted((ROOT / "conformance" / "cases").glob("*.json"))


def first_value(answer: fenecdb.Answer) -> Any:
    """The count of a write, or the first column of the first row, with a
    timestamp given back as the text the server sent."""
    if isinstance(answer, int):
        return answer
    assert answer, "no row"
    value = next(iter(answer[0].values()))
    return timestamp_text(value) if isinstance(value, datetime) else value


def same(want: Any, got: Any) -> bool:
    """The README's rule: numbers by value, everything else exactly, and a
    bool is never a number."""
    if isinstance(want, bool) or isinstance(got, bool) or not isinstance(want, (int, float)):
        return type(want) is type(got) and want == got
    return isinstance(got, (int, float)) and want == got


def check(step: Dict[str, Any], db: fenecdb.Client) -> None:
    expect = step.get("expect")
    try:
        answer = db.query(step["query"], step.get("params", []))
    except fenecdb.FenecError as e:
        assert expect and "refused" in expect, f"refused: {e!r}"
        assert e.status == expect["refused"], f"refused with {e.status}, not {expect['refused']}: {e}"
        return
    if expect is None:
        return
    assert "refused" not in expect, f"not refused: answered {answer!r}"
    if "no_row" in expect:
        assert answer == [], f"answered {answer!r}, not no row"
    else:
        got = first_value(answer)
        assert same(expect["value"], got), f"answered {got!r}, not {expect['value']!r}"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_page(page: Path, start_server: StartServer) -> None:
    case = json.loads(page.read_text())
    server = start_server()
    with fenecdb.connect(server.url) as db:
        for step in case["steps"]:
            where = f"{case['source']}:{step['line']}"
            if "advance_ms" in step:
                server.advance(step["advance_ms"])
                continue
            try:
                check(step, db)
            except AssertionError as e:
                pytest.fail(f"{where}: {step['query']}: {e}")


def test_pages_exist() -> None:
    assert PAGES, "no conformance/cases/*.json"
