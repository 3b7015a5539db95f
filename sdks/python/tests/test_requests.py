"""The SDK builds its requests itself, each with the client's headers
merged once and kept per host: what it sends is what httpx's own
build_request would."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import fenecdb


@pytest.mark.parametrize("body", [b'{"query":"get jobs"}', None])
def test_a_request_is_built_with_the_headers_httpx_gives_it(body: Any) -> None:
    """The SDK builds its requests itself (their headers merged once and
    kept, the body a stream with its Content-Length put there): the same
    method, URL, headers in the same order, and body as httpx's own."""
    with fenecdb.connect("http://127.0.0.1:9", headers={"X-Team": "mail"}, token="t0k") as db:
        http_ = db._https[db.node]
        extra = {"Content-Type": "application/json", "Authorization": "Bearer t0k"}
        for method in ("POST", "GET"):
            ours = http_.build_request(method, "/batch", content=body, headers=extra, timeout=httpx.Timeout(3))
            theirs = httpx.Client.build_request(http_, method, "/batch", content=body, headers=extra, timeout=httpx.Timeout(3))
            assert (ours.method, ours.url, ours.headers.raw, ours.content) == (theirs.method, theirs.url, theirs.headers.raw, theirs.content)
            assert ours.extensions["timeout"] == theirs.extensions["timeout"]


def test_a_request_to_another_host_names_that_host() -> None:
    """The merged headers are kept per host: a URL of another host, given
    whole, is sent with its own Host."""
    with fenecdb.connect("http://127.0.0.1:9") as db:
        http_ = db._https[db.node]
        first = http_.build_request("POST", "/query", content=b"{}", headers={})
        other = http_.build_request("POST", "http://localhost:8/query", content=b"{}", headers={})
        assert (first.headers["Host"], other.headers["Host"]) == ("127.0.0.1:9", "localhost:8")
