"""make worker-profile: where the Python worker's own CPU goes, by layer.

For each worker (threads, asyncio) and concurrency, on a fresh durable
`fenec serve` with --jobs jobs (20 000) put first, in the collection
make worker-bench uses, it runs worker.py twice: once alone, timed as worker-bench times it
(jobs/s, and the process's CPU per job from /proc), and once under py-spy
sampling only the thread that holds the interpreter's lock (--gil), whose
samples are split by the layer they were taken in:

- HTTP library: any frame of httpx, httpcore, h11, anyio, sniffio, or the
  standard library's http, email, socket and ssl (the wire);
- JSON: the json module (encoding the statements, decoding the answers);
- client: fenecdb's client (building the call, the answer, the errors);
- worker: fenecdb's worker and its runtime (claims, handler slots, acks,
  leases);
- loop and threads: asyncio's loop and selectors, threading's locks and
  events;
- other. Imports are left out (they happen before the worker says ready).

It prints each layer's share and its microseconds per job (the share of
the unprofiled run's CPU per job), and what a job would cost were the HTTP
library free — the floor no transport can go under.

    python layers.py FENEC_BIN [--jobs N] [--concurrency 10,50] [--modes threads,asyncio]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import fenecdb

HERE = Path(__file__).resolve().parent
SCHEMA = "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)"
LAYERS = ["HTTP library", "JSON", "client", "worker", "loop and threads", "other"]
HTTP_PACKAGES = ("httpx", "httpcore", "h11", "anyio", "sniffio")
HTTP_STDLIB = ("http", "email", "socket.py", "ssl.py")
LOOP_STDLIB = ("asyncio", "threading.py", "queue.py", "concurrent", "selectors.py")
WORKER_FILES = ("worker.py", "_worker.py", "_runtime.py")
FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^()]*):\d+\)$")


def serve(fenec: str, folder: str) -> Tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [fenec, "serve", "--file", os.path.join(folder, "jobs.db"), "--http", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    deadline = time.monotonic() + 30
    for line in server.stdout:
        found = re.search(r"listening on (\S+)", line)
        if found:
            return server, "http://" + found.group(1)
        if time.monotonic() > deadline:
            break
    server.kill()
    raise SystemExit(f"{fenec} did not say where it listens")


def put_jobs(db: fenecdb.Client, jobs: int) -> None:
    db.query(SCHEMA)
    for first in range(0, jobs, 1000):
        docs = [{"payload": {"to": "a@example.com", "n": n}, "run_at": "2026-01-01T00:00:00Z", "attempts": 0} for n in range(first, min(jobs, first + 1000))]
        db.query("insert jobs $1", [docs])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(fenec: str, mode: str, concurrency: int, jobs: int, spy: List[str]) -> Tuple[float, float]:
    """One worker.py run on a fresh server: jobs/s and client CPU µs/job."""
    with tempfile.TemporaryDirectory() as folder:
        server, url = serve(fenec, folder)
        try:
            with fenecdb.connect(url) as db:
                put_jobs(db, jobs)
                worker = subprocess.Popen(
                    [*spy, sys.executable, str(HERE / "worker.py"), url, str(concurrency), mode],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                try:
                    assert worker.stdout is not None and worker.stdin is not None
                    for line in worker.stdout:  # py-spy says a line of its own first
                        if line.strip() == "ready":
                            break
                    else:
                        raise SystemExit(f"worker.py did not say ready (exit {worker.wait(30)})")
                    pid = worker.pid if not spy else 0
                    cpu0 = cpu_seconds(pid) if pid else 0.0
                    start = time.perf_counter()
                    deadline = start + 120
                    while db.query("get jobs count")[0]["count"] > 0:
                        if time.perf_counter() > deadline:
                            raise SystemExit(f"{mode} c{concurrency}: jobs left after 120 s")
                        time.sleep(0.005)
                    took = time.perf_counter() - start
                    cpu = cpu_seconds(pid) - cpu0 if pid else 0.0
                    worker.stdin.close()
                    worker.stdout.read()  # py-spy's last words
                    worker.wait(60)
                finally:
                    if worker.poll() is None:  # a run given up: the worker goes too
                        worker.kill()
                        worker.wait()
        finally:
            server.terminate()
            server.wait(30)
    return jobs / took, cpu / jobs * 1e6


def where(frame: str) -> Tuple[str, str]:
    """A frame's place, from the path py-spy gives (relative to
    site-packages or to the standard library's folder): ("fenecdb", its
    file's name), or ("mod", the top package or module)."""
    found = FRAME.match(frame)
    path = found.group("file") if found else ""
    top = path.split("/")[0]
    return ("fenecdb", os.path.basename(path)) if top == "fenecdb" else ("mod", top)


def layer(stack: List[str]) -> str:
    places = [where(f) for f in stack]
    if any(k == "mod" and n in HTTP_PACKAGES + HTTP_STDLIB for k, n in places):
        return "HTTP library"
    if any(k == "mod" and n == "json" for k, n in places):
        return "JSON"
    ours = [n for k, n in places if k == "fenecdb"]
    if ours:
        return "worker" if ours[-1] in WORKER_FILES else "client"
    if any(k == "mod" and n in LOOP_STDLIB for k, n in places):
        return "loop and threads"
    return "other"


def shares(raw: str) -> Dict[str, float]:
    counts: Dict[str, int] = collections.Counter()
    for line in Path(raw).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if any("importlib" in f for f in frames):
            continue
        counts[layer(frames)] += int(n)
    total = sum(counts.values()) or 1
    return {name: counts[name] / total for name in LAYERS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fenec", help="the fenec binary")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--concurrency", default="10,50")
    parser.add_argument("--modes", default="threads,asyncio")
    args = parser.parse_args()
    py_spy = Path(sys.executable).with_name("py-spy")
    print(f"## Where the Python worker's CPU goes ({args.jobs} jobs a run, fenecdb {fenecdb.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f})")
    print()
    print(
        "Each Python worker run alone (jobs/s; client CPU: the process's user + system time per job), then again "
        "under `py-spy record --gil`: each layer's share of the samples taken while a thread held the interpreter's "
        "lock, and in brackets that share of the CPU per job, in µs. The last column is the CPU a job would take "
        "were the HTTP library free. Imports are left out."
    )
    print()
    print("| worker | jobs/s | client CPU µs/job | " + " | ".join(LAYERS) + " | µs/job with the HTTP library free |")
    print("| --- " * (len(LAYERS) + 4) + "|")
    for c in (int(x) for x in args.concurrency.split(",")):
        for mode in args.modes.split(","):
            rate, cpu = run(args.fenec, mode, c, args.jobs, [])
            with tempfile.TemporaryDirectory() as folder:
                raw = os.path.join(folder, "raw.txt")
                run(args.fenec, mode, c, args.jobs, [str(py_spy), "record", "--gil", "-r", "400", "-f", "raw", "-o", raw, "--"])
                split = shares(raw)
            cells = " | ".join(f"{split[name] * 100:.0f}% ({split[name] * cpu:.0f})" for name in LAYERS)
            print(f"| {mode} c{c} | {rate:.0f} | {cpu:.0f} | {cells} | {(1 - split['HTTP library']) * cpu:.0f} |", flush=True)


if __name__ == "__main__":
    main()
