#!/usr/bin/env python3
"""Lists the server's files whose code runs for one held claim woken by a
put (docs/architecture.md, "The life of a claim").

It builds fenec with coverage counters, drives a server under --sync always
through three such claims and, separately, through four (each run ends with
the same put alone when it had three), and prints the files whose counters
grew: the fourth claim's. What the claim shares with the put (the one sync
of their group) counts the same in both runs and so does not show; the
store's fold (store/fold.go) runs later, on the committer, at shutdown.

    python3 scripts/claim-path.py        # from the repository's root
"""
import json, os, shutil, signal, socket, subprocess, sys, tempfile, time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLAIM = json.dumps({"query": "set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} "
                    "where run_at <= now() order run_at limit 10 returning *", "params": ["w1"]})
PUT = json.dumps({"query": "put jobs {run_at: now(), attempts: 0}", "params": []})
DDL = json.dumps({"query": "create collection jobs (payload json, run_at timestamp @sorted, "
                  "owner text, attempts int, error text)", "params": []})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port):
    for _ in range(400):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            time.sleep(0.05)
    sys.exit("the server did not listen")


def send(c, body, head=""):
    b = body.encode()
    c.sendall(b"POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              + head.encode() + b"Content-Length: %d\r\n\r\n" % len(b) + b)


def answer(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += c.recv(65536)
    head, rest = buf.split(b"\r\n\r\n", 1)
    n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
    while len(rest) < n:
        rest += c.recv(65536)
    return rest


def held(port):
    c = connect(port)
    c.sendall(b"GET /_metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    buf = b""
    while (x := c.recv(65536)):
        buf += x
    for line in buf.decode().split("\n"):
        if line.startswith("fenec_held_claims "):
            return float(line.split()[1])
    return None


def run(binary, claims, covdir, work):
    port = free_port()
    env = dict(os.environ, GOCOVERDIR=covdir)
    p = subprocess.Popen([binary, "serve", "--file", os.path.join(work, "c%d.db" % claims), "--sync", "always",
                          "--http", "127.0.0.1:%d" % port], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        w = connect(port)
        send(w, DDL)
        answer(w)
        for _ in range(claims):
            c = connect(port)
            send(c, CLAIM, "Fenec-Wait: 30000\r\n")
            time.sleep(0.3)
            assert held(port) == 1, "the claim is not held"
            send(w, PUT)
            answer(w)
            assert b'"w1"' in answer(c), "the claim did not take the job"
            c.close()
        if claims == 3:  # the fourth run's put, without its claim
            c = connect(port)
            time.sleep(0.3)
            assert held(port) == 0
            send(w, PUT)
            answer(w)
            c.close()
        time.sleep(0.2)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait()


def counters(covdir, out):
    subprocess.run(["go", "tool", "covdata", "textfmt", "-i", covdir, "-o", out], cwd=os.path.join(ROOT, "server"), check=True)
    d = Counter()
    with open(out) as f:
        next(f)
        for line in f:
            block, _, count = line.rsplit(" ", 2)
            d[block] += int(count)
    return d


def main():
    work = tempfile.mkdtemp(prefix="claim-path-")
    try:
        report(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(work):
    binary = os.path.join(work, "fenec")
    subprocess.run(["go", "build", "-cover", "-covermode=atomic", "-coverpkg=./...", "-o", binary, "./cmd/fenec"],
                   cwd=os.path.join(ROOT, "server"), check=True)
    runs = {}
    for n in (3, 4):
        covdir = os.path.join(work, "cov%d" % n)
        os.makedirs(covdir)
        run(binary, n, covdir, work)
        runs[n] = counters(covdir, covdir + ".txt")
    files = Counter()
    for block, count in runs[4].items():
        if count > runs[3].get(block, 0):
            files[block.split(":")[0].replace("github.com/fenecdb/fenec/server/", "")] += 1
    for f in sorted(files):
        print("%4d %s" % (files[f], f))
    print(len(files), "files (blocks that ran more for the fourth claim)")


if __name__ == "__main__":
    main()
