"""The builder renders every chain of conformance/builder-golden.json exactly,
and follows the rendering rules; nothing here is sent."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

import fenecdb
from fenecdb import Statement, expr, inc, raw

from .conftest import ROOT

GOLDEN = ROOT / "conformance" / "builder-golden.json"

# The golden file's option names (JS) → this SDK's keyword arguments.
_OPTIONS = {"returning": "returning", "require": "require"}


def _special(arg: Any) -> Any:
    """A golden argument with its {"$raw"}/{"$expr"}/{"$inc"} objects made helpers."""
    if isinstance(arg, dict):
        if set(arg) == {"$raw"}:
            return raw(*arg["$raw"])
        if set(arg) == {"$expr"}:
            return expr(*arg["$expr"])
        if set(arg) == {"$inc"}:
            return inc(arg["$inc"])
        return {k: _special(v) for k, v in arg.items()}
    if isinstance(arg, list):
        return [_special(v) for v in arg]
    return arg


def _options(opts: Dict[str, Any]) -> Dict[str, Any]:
    # Options that do not change the text (wait, signal, idempotencyKey) are the transport's.
    return {_OPTIONS[k]: v for k, v in opts.items() if k in _OPTIONS}


def render_chain(chain: List[Dict[str, Any]]) -> Statement:
    """Runs a golden chain on the builder and renders its endpoint."""
    first, *middle, last = chain
    assert first["call"] in ("from", "collection")
    q: Any = fenecdb.connect("http://unused.invalid").collection(*first["args"])
    for step in middle:
        q = getattr(q, step["call"])(*[_special(a) for a in step["args"]])
    args = [_special(a) for a in last["args"]]
    call = last["call"]
    if call in ("rows", "first", "count"):
        return getattr(q, "render_" + call)()  # type: ignore[no-any-return]
    if call == "insert":
        return q.render_insert(*args)  # type: ignore[no-any-return]
    if call == "update":
        return q.render_update(args[0], **_options(args[1] if len(args) > 1 else {}))  # type: ignore[no-any-return]
    if call == "delete":
        return q.render_delete(**_options(args[0] if args else {}))  # type: ignore[no-any-return]
    raise AssertionError(f"unknown endpoint {call}")


def _golden_cases() -> List[Any]:
    cases = json.loads(GOLDEN.read_text())["cases"]
    return [pytest.param(case, id=case["name"]) for case in cases]


@pytest.mark.parametrize("case", _golden_cases())
def test_golden(case: Dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises((ValueError, TypeError)) as info:
            render_chain(case["chain"])
        assert case["error"] in str(info.value)
        return
    got = render_chain(case["chain"])
    assert got.query == case["query"]
    # JSON text compares types too: True is not 1, 1 is not 1.0.
    assert json.dumps(list(got.params)) == json.dumps(case["params"])


jobs = fenecdb.connect("http://unused.invalid").collection("jobs")


def test_seed_worker_loop() -> None:
    claim = (
        jobs.where(raw("run_at <= now()"))
        .order("run_at")
        .limit(10)
        .render_update({"owner": "w1:1842", "run_at": expr("now() + ?", 30000), "attempts": inc(1)}, returning=True)
    )
    assert claim == Statement(
        "set jobs {owner: $1, run_at: now() + $2, attempts: attempts + $3}"
        " where run_at <= now() order run_at limit 10 returning *",
        ("w1:1842", 30000, 1),
    )
    ack = jobs.where("id", 7).where("owner", "w1:1842").render_delete(require=1)
    assert ack == Statement("del jobs where id = $1 and owner = $2 require 1", (7, "w1:1842"))
    fail = (
        jobs.where("id", 7)
        .where("owner", "w1:1842")
        .render_update({"owner": None, "run_at": expr("now() + ?", 2000)}, require=1)
    )
    assert fail == Statement(
        "set jobs {owner: null, run_at: now() + $1} where id = $2 and owner = $3 require 1", (2000, 7, "w1:1842")
    )


def test_reads() -> None:
    q = jobs.select("id", "payload.to").where("attempts", ">=", 5).where("owner", None).order("run_at", "desc")
    assert q.limit(10).offset(20).render_rows() == Statement(
        "get jobs select id, payload.to where attempts >= $1 and owner is null order run_at desc limit 10 offset 20",
        (5,),
    )
    assert q.render_first().query.endswith("order run_at desc limit 1")
    assert jobs.where("id", "in", [1, 2]).render_count() == Statement("get jobs where id in $1 count", ([1, 2],))
    assert jobs.order("a").order("b", "desc").render_rows().query == "get jobs order a, b desc"


def test_raw_marks_and_wrapping() -> None:
    q = jobs.where(raw("owner = '?' or attempts > ?", 3)).where("id", 1)
    assert q.render_rows() == Statement("get jobs where (owner = '?' or attempts > $1) and id = $2", (3, 1))
    escaped = jobs.where(raw('error = "a \\" ?" and id = ?', 9))
    assert escaped.render_rows() == Statement('get jobs where error = "a \\" ?" and id = $1', (9,))


def test_insert() -> None:
    assert jobs.render_insert({"payload": {"to": "a"}, "run_at": expr("now()"), "attempts": 0}) == Statement(
        "insert jobs {payload: $1, run_at: now(), attempts: $2}", ({"to": "a"}, 0)
    )
    assert jobs.render_insert([{"attempts": 1}, {"attempts": 2}]) == Statement(
        "insert jobs [{attempts: $1}, {attempts: $2}]", (1, 2)
    )


def test_delete_returning_list() -> None:
    q = jobs.where(raw("run_at <= now()")).order("run_at").limit(10)
    assert q.render_delete(returning=["id", "payload"]).query == (
        "del jobs where run_at <= now() order run_at limit 10 returning id, payload"
    )


def test_immutable() -> None:
    base = jobs.where("owner", "w1")
    base.where("id", 1).limit(3)
    assert base.render_rows() == Statement("get jobs where owner = $1", ("w1",))
    with pytest.raises(AttributeError):
        base.name = "other"  # type: ignore[misc]
    assert fenecdb.connect("http://unused.invalid").from_("jobs") == jobs


@pytest.mark.parametrize(
    "make, word",
    [
        (lambda: jobs.db.collection("jobs; drop"), "collection"),
        (lambda: jobs.where("run_at; drop", 1), "field"),
        (lambda: jobs.where("a", "like", 1), "operator"),
        (lambda: jobs.order("a", "up"), "direction"),
        (lambda: jobs.order("a.b-c"), "field"),
        (lambda: jobs.limit(-1), "limit"),
        (lambda: jobs.limit(True), "limit"),
        (lambda: jobs.offset(1.5), "offset"),  # type: ignore[arg-type]
        (lambda: jobs.select("*", "id"), "field"),
        (lambda: jobs.select(), "empty"),
        (lambda: jobs.where(raw("a = ? and b = ?", 1)).render_rows(), "raw"),
        (lambda: jobs.where(raw("a = ?", 1, 2)).render_rows(), "marks"),
        (lambda: jobs.render_update({"a": expr("b + $1", 1)}), "expr"),
        (lambda: jobs.where("id", "in", 3), "list"),
        (lambda: jobs.limit(1).render_insert({"a": 1}), "limit"),
        (lambda: jobs.select("id").render_update({"a": 1}), "select"),
        (lambda: jobs.offset(2).render_delete(), "offset"),
        (lambda: jobs.render_update({}), "patch"),
        (lambda: jobs.render_update({"a b": 1}), "field"),
        (lambda: jobs.render_update({"a": 1}, require=-1), "require"),
        (lambda: jobs.render_update({"a": 1}, returning=[]), "returning"),
        (lambda: jobs.render_update({"a": 1}, returning=["x y"]), "field"),
        (lambda: jobs.render_insert({"a.b": 1}), "field"),
        (lambda: jobs.render_insert([]), "insert"),
        (lambda: jobs.render_insert({"a": inc(1)}), "inc"),
        (lambda: jobs.where("a", raw("x")).render_rows(), "raw"),
        (lambda: inc("1"), "number"),  # type: ignore[arg-type]
    ],
)
def test_refusals(make: Any, word: str) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        make()
    assert word in str(info.value)
