"""The client's requests and how it reads answers, against a mock transport:
headers, timeouts, datetimes, and the mapping of error codes to classes."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, List

import httpx
import pytest

import fenecdb
from fenecdb import _generated as api
from fenecdb._errors import ERRORS

Handler = Callable[[httpx.Request], httpx.Response]


def client(handler: Handler, **kw: Any) -> fenecdb.Client:
    return fenecdb.Client("http://fenec.test", transport=httpx.MockTransport(handler), **kw)


def recorder(answer: Any, status: int = 200) -> "tuple[List[httpx.Request], Handler]":
    seen: List[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=answer)

    return seen, handle


def test_claim_request() -> None:
    seen, handle = recorder([])
    db = client(handle, token="secret", timeout=5)
    jobs = db.collection("jobs")
    jobs.where(fenecdb.raw("run_at <= now()")).limit(1).update(
        {"owner": "w1"}, returning=True, wait=30, idempotency_key="k1"
    )
    (req,) = seen
    assert (req.method, req.url.path) == ("POST", "/query")
    assert req.headers["Authorization"] == "Bearer secret"
    assert req.headers[api.HEADER_FENEC_WAIT] == "30000"
    assert req.headers[api.HEADER_IDEMPOTENCY_KEY] == "k1"
    assert req.headers["Content-Type"] == "application/json"
    # The answer is awaited as much longer than the client's timeout as the wait.
    assert req.extensions["timeout"] == {"connect": 5, "read": 35, "write": 5, "pool": 5}
    assert json.loads(req.content) == {
        "query": "set jobs {owner: $1} where run_at <= now() limit 1 returning *",
        "params": ["w1"],
    }


def test_no_wait_header_without_wait() -> None:
    seen, handle = recorder({"affected": 1})
    assert client(handle, timeout=None).collection("jobs").where("id", 1).delete() == 1
    assert api.HEADER_FENEC_WAIT not in seen[0].headers
    assert seen[0].extensions["timeout"]["read"] is None


@pytest.mark.parametrize("wait", [-1, True, "30"])
def test_wait_refused(wait: float) -> None:
    db = client(recorder([])[1])
    with pytest.raises(ValueError, match="wait is a number of seconds"):
        db.collection("jobs").update({"a": 1}, wait=wait)


def test_datetimes() -> None:
    at = datetime(2026, 5, 3, 11, 20, 0, 250000, tzinfo=timezone(timedelta(hours=2)))
    row = {"id": 1, "run_at": "2026-05-03T09:20:00.250Z", "note": "2026-05-03T09:20:00Z", "n": 2}
    seen, handle = recorder([row])
    db = client(handle)
    (got,) = db.collection("jobs").where("run_at", "<=", at).rows()
    assert json.loads(seen[0].content)["params"] == ["2026-05-03T09:20:00.250Z"]
    assert got == {"id": 1, "run_at": at, "note": "2026-05-03T09:20:00Z", "n": 2}
    assert got["run_at"].tzinfo is timezone.utc
    assert list(got) == ["id", "run_at", "note", "n"]  # column order kept
    with pytest.raises(ValueError, match="naive"):
        db.query("get jobs where run_at < $1", [datetime(2026, 5, 3)])


def test_answers() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        if request.url.path == "/batch":
            assert body == {
                "statements": [
                    {"query": "get jobs where id = $1 count", "params": [3]},
                    {"query": "del jobs", "params": []},
                ]
            }
            return httpx.Response(200, json={"results": [[{"count": 0}], {"affected": 2}]})
        if request.url.path == "/_health":
            return httpx.Response(200, json={"ok": True})
        if request.url.path == "/collections":
            return httpx.Response(200, json={"collections": []})
        if "count" in body["query"]:
            return httpx.Response(200, json=[{"count": 4}])
        return httpx.Response(200, json=[{"id": 1}] if "limit 1" in body["query"] else [])

    db = client(handle)
    jobs = db.from_("jobs")
    assert jobs.count() == 4
    assert jobs.first() == {"id": 1}
    assert jobs.rows() == []
    assert db.batch([jobs.where("id", 3).render_count(), "del jobs"]) == [[{"count": 0}], 2]
    assert db.health() is True
    assert db.collections() == []


@pytest.mark.parametrize("code", sorted(api.ERROR_CLASS_NAMES))
def test_error_mapping(code: str) -> None:
    _, handle = recorder({"error": f"it is {code}", "code": code, "at": 1}, status=418)
    with pytest.raises(fenecdb.FenecError) as info:
        client(handle).query("get jobs")
    err = info.value
    assert type(err) is ERRORS[code]
    assert type(err).__name__ == api.ERROR_CLASS_NAMES[code]
    assert getattr(fenecdb, type(err).__name__) is type(err)
    assert (err.status, err.code, err.at, err.message) == (418, code, 1, f"it is {code}")
    assert str(err) == f"it is {code} (418 {code}, statement 1)"


def test_error_not_fenecs() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    with pytest.raises(fenecdb.FenecError) as info:
        client(handle).query("get jobs")
    assert type(info.value) is fenecdb.FenecError
    assert (info.value.status, info.value.code, info.value.at) == (502, "", None)
    assert "bad gateway" in info.value.message


def test_unknown_code_is_a_fenec_error() -> None:
    _, handle = recorder({"error": "new", "code": "something_new"}, status=400)
    with pytest.raises(fenecdb.FenecError) as info:
        client(handle).query("get jobs")
    assert type(info.value) is fenecdb.FenecError and info.value.code == "something_new"


def test_async_client() -> None:
    seen, handle = recorder([{"id": 1, "at": "2026-05-03T09:20:00.000Z"}])

    async def run() -> None:
        transport = httpx.MockTransport(handle)
        async with fenecdb.AsyncClient("http://fenec.test", transport=transport, timeout=2) as db:
            rows = await db.collection("jobs").where("id", 1).delete(returning=["id", "at"], wait=1.5)
            assert rows == [{"id": 1, "at": datetime(2026, 5, 3, 9, 20, tzinfo=timezone.utc)}]

    asyncio.run(run())
    assert seen[0].headers[api.HEADER_FENEC_WAIT] == "1500"
    assert seen[0].extensions["timeout"]["read"] == 3.5
