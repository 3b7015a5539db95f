"""Several nodes (docs/sdks.md, "Several nodes"): the clients against three
real ``fenec serve`` nodes on loopback — a follower listed first, a held
claim across a leadership transfer, the leader SIGKILLed — and, over
httpx's MockTransport, what a real server cannot produce (a leader named
over http to an https client)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, List, Set, Tuple

import httpx
import pytest

import fenecdb
from fenecdb import raw

from .conftest import JOBS, Cluster, Server, StartServer

QUEUE = JOBS.replace("create collection", "create collection if not exists")


def test_follower_first_follows_the_leader(cluster: Cluster) -> None:
    leader = cluster.leader()
    follower, other = [n for n in cluster.nodes if n is not leader]
    with fenecdb.connect([follower.url, other.url, leader.url], token=cluster.token) as db:
        assert db.node == follower.url
        db.query(QUEUE)
        assert db.node == leader.url, "the write followed Fenec-Leader; the leader is the current node"
        jobs = db.from_("jobs")
        assert jobs.insert({"payload": {"n": 1}, "run_at": "1970-01-01T00:00:00.000Z", "attempts": 0}) == 1
        claimed = jobs.where(raw("run_at <= now()")).order("run_at").limit(1).update({"owner": "w1"}, returning=True)
        assert len(claimed) == 1
        before = cluster.metric(follower, "fenec_http_requests_total", 'route="/query"')
        for i in range(5):
            jobs.insert({"payload": {"n": i}, "run_at": "1970-01-01T00:00:00.000Z", "attempts": 0})
        jobs.count()
        after = cluster.metric(follower, "fenec_http_requests_total", 'route="/query"')
        assert after == before, "later calls went straight to the leader"


@pytest.mark.anyio
async def test_held_claim_across_a_leadership_transfer(cluster: Cluster, anyio_backend: str) -> None:
    leader = cluster.leader()
    async with fenecdb.connect_async(",".join(n.url for n in cluster.nodes), token=cluster.token) as db:
        await db.query(QUEUE)
        assert db.node == leader.url
        claim = asyncio.ensure_future(
            db.from_("jobs").where(raw("run_at <= now()")).order("run_at").limit(1).update({"owner": "held"}, returning=True, wait=15)
        )
        for _ in range(200):
            if cluster.metric(leader, "fenec_held_claims") == 1:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the claim was not held at the leader within 2 s")
        with cluster.http(leader) as h:
            moved = h.post("/_cluster/leader", json={})
        assert moved.status_code == 200, moved.text
        for _ in range(100):
            new = cluster.leader()
            if new is not leader:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("leadership did not move")
        with cluster.http(new) as h:
            put = h.post("/query", json={"query": "insert jobs {payload: $1, run_at: $2, attempts: 0}", "params": [{"after": "transfer"}, "1970-01-01T00:00:00.000Z"]})
        assert put.status_code == 200, put.text
        got = await asyncio.wait_for(claim, 20)
        assert [r["payload"] for r in got] == [{"after": "transfer"}]
        assert db.node == new.url, "the client follows the new leader"


def test_leader_killed(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    leader = cluster.leader()
    with fenecdb.connect(list(reversed([n.url for n in cluster.nodes])), token=cluster.token) as db:
        db.query(QUEUE)
        jobs = db.from_("jobs")
        jobs.insert({"payload": {"before": "kill"}, "run_at": "1970-01-01T00:00:00.000Z", "attempts": 0})
        assert db.node == leader.url
        leader.kill()
        killed = time.monotonic()
        assert jobs.count() >= 0  # a follower may not have applied the last write yet (docs/cluster.md, "Reads")
        read = time.monotonic() - killed
        assert db.node != leader.url
        assert jobs.insert({"payload": {"after": "kill"}, "run_at": "1970-01-01T00:00:00.000Z", "attempts": 0}) == 1
        write = time.monotonic() - killed
        assert db.node == cluster.leader().url, "the insert found the new leader"
    with capsys.disabled():
        print(f"\nafter SIGKILL of the leader: read answered in {read * 1000:.0f} ms, insert in {write * 1000:.0f} ms")
    assert write < 5, f"the insert took {write:.2f} s after the kill"


def test_worker_across_the_leader_killed(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """The threaded worker (its held claims on an asyncio client of its
    own, which shares the node sent to) runs every job across a failover."""
    leader = cluster.leader()
    done: Set[int] = set()
    errors: List[str] = []
    lock = threading.Lock()

    def handler(row: fenecdb.Row, cancel: threading.Event) -> None:
        time.sleep(0.02)
        with lock:
            done.add(row["payload"]["n"])

    def put(db: fenecdb.Client, n: int, start: int) -> None:
        db.from_("jobs").insert([{"payload": {"n": start + i}, "run_at": "1970-01-01T00:00:00.000Z", "attempts": 0} for i in range(n)])

    def until(what: str, check: Callable[[], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not check():
            assert time.monotonic() < deadline, f"not {what} in {seconds} s; the worker's faults: {errors}"
            time.sleep(0.02)

    with fenecdb.connect([n.url for n in cluster.nodes], token=cluster.token) as db:
        db.query(QUEUE)
        put(db, 20, 0)
        w = fenecdb.Worker(
            db.from_("jobs"), handler, concurrency=4, lease=2, wait=1, backoff=lambda n: 0.1,
            on_error=lambda e: errors.append(str(e)),
        )
        w.start()
        try:
            until("5 jobs run", lambda: len(done) >= 5, 10)
            leader.kill()
            killed = time.monotonic()
            put(db, 20, 20)
            until("all 40 jobs run", lambda: len(done) == 40, 20)
            took = time.monotonic() - killed
            until("every job acked", lambda: db.from_("jobs").count() == 0, 5)
        finally:
            w.stop()
    with capsys.disabled():
        print(f"\nthe worker ran all 40 jobs {took * 1000:.0f} ms after the leader's SIGKILL ({len(errors)} faults reported)")


# The rules, over httpx's MockTransport.

# What a cluster's node answers a write it refuses unrun: a follower 403
# naming the leader; a node that knows no leader, or was just elected and
# applies the earlier terms' writes first, 503 no_leader (docs/cluster.md).


def no_leader() -> httpx.Response:
    return httpx.Response(503, json={"error": "no leader is elected now: send the write again shortly, to any node", "code": "no_leader"})


def refusal(leader: str) -> httpx.Response:
    msg = f"this node is not the cluster's leader: send writes to the leader at {leader}"
    return httpx.Response(403, json={"error": msg, "code": "forbidden"}, headers={"Fenec-Leader": leader})


def mock(answer: Callable[[httpx.Request], httpx.Response]) -> Tuple[httpx.MockTransport, List[httpx.Request]]:
    sent: List[httpx.Request] = []

    def handle(req: httpx.Request) -> httpx.Response:
        sent.append(req)
        return answer(req)

    return httpx.MockTransport(handle), sent


def test_bad_url_among_several_is_named() -> None:
    with pytest.raises(ValueError, match=r"^node 2 of 3: the server URL 'ftp://b:8080' is not http\(s\)://host\[:port\]$"):
        fenecdb.connect("http://a:8080,ftp://b:8080,http://c:8080")
    with pytest.raises(ValueError, match=r"^node 3 of 3: "):
        fenecdb.connect_async(["http://a:8080", "http://b:8080", "b:8080"])
    with pytest.raises(ValueError, match="needs a server URL"):
        fenecdb.connect([])
    with fenecdb.connect(" http://a:8080 , http://b:8080") as db:
        assert db.node == "http://a:8080"


def test_https_does_not_follow_http() -> None:
    transport, sent = mock(lambda req: refusal("http://10.0.0.3:8080"))
    with fenecdb.Client("https://a.test", transport=transport) as db:
        with pytest.raises(fenecdb.Forbidden) as e:
            db.query("insert jobs {}")
        assert (e.value.status, e.value.leader) == (403, "http://10.0.0.3:8080")
        assert [str(r.url) for r in sent] == ["https://a.test/query"]
        assert db.node == "https://a.test"


def test_follows_the_same_request_at_most_three_times() -> None:
    transport, sent = mock(lambda req: httpx.Response(200, json={"affected": 1}) if req.url.host == "c.test" else refusal("https://c.test"))
    with fenecdb.Client("https://a.test", token="t", transport=transport) as db:
        assert db.query("insert jobs {n: $1}", [1], idempotency_key="k1", wait=0.1) == 1
        assert [str(r.url) for r in sent] == ["https://a.test/query", "https://c.test/query"]
        first, second = sent
        assert second.content == first.content and second.method == first.method
        for h in ("authorization", "idempotency-key", "fenec-wait", "content-type"):
            assert second.headers[h] == first.headers[h], h
        assert db.node == "https://c.test"

    transport, sent = mock(lambda req: refusal("http://b.test" if req.url.host == "a.test" else "http://a.test"))
    with fenecdb.Client("http://a.test", transport=transport) as db:
        with pytest.raises(fenecdb.Forbidden):
            db.query("insert jobs {}")
        assert len(sent) == 4


def test_no_leader_one_url_same_node_after_each_pause() -> None:
    transport, sent = mock(lambda req: no_leader() if len(sent) <= 2 else httpx.Response(200, json={"affected": 1}))
    with fenecdb.Client("http://a.test", transport=transport) as db:
        began = time.monotonic()
        assert db.query("insert jobs {}") == 1
        took = time.monotonic() - began
    assert [str(r.url) for r in sent] == ["http://a.test/query"] * 3
    assert took >= 0.15, f"two pauses (50 + 100 ms), took {took:.3f} s"

    transport, sent = mock(lambda req: no_leader())
    with fenecdb.Client("http://a.test", transport=transport, timeout=0.3) as db:
        began = time.monotonic()
        with pytest.raises(fenecdb.NoLeader) as e:
            db.query("insert jobs {}")
        took = time.monotonic() - began
    assert (e.value.status, e.value.code) == (503, "no_leader")
    assert 0.1 <= took < 1.5, f"raised at the deadline (300 ms), took {took:.3f} s"
    assert 3 <= len(sent) <= 5, f"50, 100 ms pauses within 300 ms: {len(sent)} requests"


@pytest.mark.anyio
async def test_no_leader_one_url_async() -> None:
    async def handle(req: httpx.Request) -> httpx.Response:
        sent.append(req)
        return no_leader() if len(sent) == 1 else httpx.Response(200, json={"affected": 1})

    sent: List[httpx.Request] = []
    async with fenecdb.AsyncClient("http://a.test", transport=httpx.MockTransport(handle)) as db:
        assert await db.query("insert jobs {}") == 1
    assert [str(r.url) for r in sent] == ["http://a.test/query"] * 2


def test_no_leader_several_urls_next_node_after_each_pause() -> None:
    def several(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"affected": 1}) if len(sent) >= 4 and req.url.host == "b.test" else no_leader()

    transport, sent = mock(several)
    with fenecdb.Client("http://a.test,http://b.test,http://c.test", transport=transport) as db:
        began = time.monotonic()
        db.query("insert jobs {}")
        took = time.monotonic() - began
        assert [r.url.host for r in sent] == ["a.test", "b.test", "c.test", "a.test", "b.test"]
        assert took >= 0.75, f"a pause before each resend (50, 100, 200, 400 ms), took {took:.3f} s"
        assert db.node == "http://b.test"


def test_mid_election_follows_count_since_the_last_pause() -> None:
    # Two followers name l.test, which answers no_leader four times (taking
    # office) before it serves: 1 + 4 follows in all, never more than 1
    # between two pauses, so the limit of 3 follows between pauses does not end it.
    office: List[int] = []

    def answer(req: httpx.Request) -> httpx.Response:
        if req.url.host != "l.test":
            return refusal("http://l.test")
        office.append(1)
        return no_leader() if len(office) <= 4 else httpx.Response(200, json={"affected": 1})

    transport, sent = mock(answer)
    with fenecdb.Client("http://a.test,http://b.test", transport=transport) as db:
        assert db.query("insert jobs {}") == 1
        assert [r.url.host for r in sent] == ["a.test", "l.test", "b.test", "l.test"] * 2 + ["a.test", "l.test"]
        assert db.node == "http://l.test"


def test_rules_403_and_lost_503_are_raised_at_once() -> None:
    transport, sent = mock(lambda req: httpx.Response(403, json={"error": "the token may not write jobs", "code": "forbidden"}))
    with fenecdb.Client("http://a.test,http://b.test", transport=transport) as db:
        with pytest.raises(fenecdb.Forbidden):
            db.query("insert jobs {}")
    assert len(sent) == 1
    lost = {"error": "the write's outcome in the cluster is unknown (leadership lost)", "code": "unavailable"}
    transport, sent = mock(lambda req: httpx.Response(503, json=lost))
    with fenecdb.Client("http://a.test,http://b.test", transport=transport) as db:
        with pytest.raises(fenecdb.Unavailable):
            db.query("insert jobs {}")
    assert len(sent) == 1, "an outcome unknown is the caller's to retry"


def test_refused_connections(refused_url: str, server: Server) -> None:
    # Duplicates are one URL: raised at once, as today.
    with fenecdb.connect(f"{refused_url},{refused_url}/", timeout=0.3) as db:
        began = time.monotonic()
        with pytest.raises(fenecdb.NetworkError):
            db.query("get jobs")
        assert time.monotonic() - began < 0.2
    # A dead node first, a live one next: the call succeeds there.
    with fenecdb.connect([refused_url, server.url]) as db:
        assert db.health() == {"ok": True, "store": "ok"}
        assert db.node == server.url
    # Every node dead: the last error at the deadline.
    other = refused_url.rsplit(":", 1)[0] + ":1"
    with fenecdb.connect([refused_url, other], timeout=0.3) as db:
        began = time.monotonic()
        with pytest.raises(fenecdb.NetworkError, match="connection refused"):
            db.query("get jobs")
        took = time.monotonic() - began
        # Pauses of 50 and 100 ms between rounds; the next (200 ms) would
        # end past the 0.3 s deadline, so the last error is raised then.
        assert 0.15 <= took < 1.5, took


def test_error_leader_is_none_on_other_errors() -> None:
    transport, _ = mock(lambda req: httpx.Response(409, json={"error": "id 1 is taken", "code": "conflict"}, headers={"Fenec-Leader": "http://x"}))
    with fenecdb.Client("http://a.test", transport=transport) as db:
        with pytest.raises(fenecdb.Conflict) as e:
            db.query("insert jobs {}")
    assert e.value.leader is None


def test_read_your_writes_after_moving_node(start_server: StartServer) -> None:
    """The client sends the highest Fenec-Seq it was answered as Fenec-After,
    so a node it moves to answers only once it has applied those writes. Two
    lone servers stand in for a node and one that has not applied the
    client's writes (a lone server refuses at once, with a 400, a
    Fenec-After beyond its own last write): moved to the second, the client
    is refused rather than answered as if its writes were not there."""
    first, second = start_server(), start_server()
    with fenecdb.connect([first.url, second.url]) as db:
        db.query(JOBS)
        assert db.from_("jobs").insert({"payload": {}, "run_at": "1970-01-01T00:00:00.000Z", "attempts": 0}) == 1
        assert db.from_("jobs").count() == 1  # sent with Fenec-After: the first node has made the write
        first.stop()
        with pytest.raises(fenecdb.FenecError) as err:
            db.from_("jobs").count()
        assert err.value.status == 400 and "Fenec-After" in str(err.value), err.value
        assert db.node == second.url


def test_consumer_ack_follows_the_leader(cluster: Cluster) -> None:
    """A consumer reads on the node it is sent to; its ack is a write, which
    a follower refuses naming the leader, and the client follows it."""
    leader = cluster.leader()
    follower = next(n for n in cluster.nodes if n is not leader)
    with fenecdb.connect(leader.url, token=cluster.token) as w:
        w.query("create collection if not exists msgs (text text)")
        # Two writes, two positions (one insert of both would share one).
        w.from_("msgs").insert({"text": "a"})
        w.from_("msgs").insert({"text": "b"})
    with fenecdb.connect([follower.url, leader.url], token=cluster.token) as db:
        k = db.consumer("mailer", "msgs")
        first = k.read(limit=1, wait=5)  # held on the follower until it has applied a change
        assert [c["id"] for c in first["changes"]] == [1], first
        assert db.node == follower.url and first["next"] > 0, first
        k.ack(first["next"])
        assert db.node == leader.url, "the ack followed Fenec-Leader"
        rest = k.read(wait=5)
        assert rest["position"] == first["next"] and first["next"] > 0 and [c["id"] for c in rest["changes"]] == [2]
