"""https: the clients against ``fenec serve --tls-cert``, with a CA the test
makes with the openssl CLI."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

import fenecdb
from tests.conftest import StartServer

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI to make certificates")


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certs(d: Path, name: str) -> Dict[str, str]:
    """A CA and a certificate it signed for 127.0.0.1 and localhost."""
    ca, ca_key = d / f"{name}-ca.pem", d / f"{name}-ca-key.pem"
    cert, key, csr, ext = d / f"{name}.pem", d / f"{name}-key.pem", d / f"{name}.csr", d / f"{name}.ext"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", f"/CN={name} CA", "-keyout", str(ca_key), "-out", str(ca),
            # Python 3.13 checks X.509 strictly: a CA must say it signs certificates.
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-days", "1", "-extfile", str(ext), "-out", str(cert))
    return {"ca": str(ca), "cert": str(cert), "key": str(key)}


def test_https_with_a_ca_file(start_server: StartServer, tmp_path: Path) -> None:
    c = make_certs(tmp_path, "server")
    server = start_server("--tls-cert", c["cert"], "--tls-key", c["key"])
    url = server.url.replace("http://", "https://")
    with fenecdb.connect(url, verify=c["ca"]) as db:
        db.query("create collection notes (s text)")
        db.query("put notes {s: $1}", ["over tls"])
        rows = db.query("get notes select s")
        assert isinstance(rows, fenecdb.Rows) and [r["s"] for r in rows] == ["over tls"]
    ctx = ssl.create_default_context(cafile=c["ca"])
    with fenecdb.connect(url, verify=ctx) as db:
        assert db.query("get notes").affected == 1


def test_https_without_the_ca_is_refused(start_server: StartServer, tmp_path: Path) -> None:
    c = make_certs(tmp_path, "server")
    server = start_server("--tls-cert", c["cert"], "--tls-key", c["key"])
    url = server.url.replace("http://", "https://")
    with fenecdb.connect(url) as db:
        with pytest.raises(fenecdb.NetworkError, match="TLS: the server's certificate failed the check: unable to get local issuer certificate"):
            db.health()


def test_client_certificate(start_server: StartServer, tmp_path: Path) -> None:
    c = make_certs(tmp_path, "server")
    clients = make_certs(tmp_path, "clients")
    server = start_server("--tls-cert", c["cert"], "--tls-key", c["key"], "--tls-client-ca", clients["ca"])
    url = server.url.replace("http://", "https://")
    ctx = ssl.create_default_context(cafile=c["ca"])
    ctx.load_cert_chain(clients["cert"], clients["key"])
    with fenecdb.connect(url, verify=ctx) as db:
        assert db.collections() == []
    with fenecdb.connect(url, verify=c["ca"]) as db:
        with pytest.raises(fenecdb.NetworkError, match="TLS"):
            db.collections()


def test_https_async(start_server: StartServer, tmp_path: Path) -> None:
    c = make_certs(tmp_path, "server")
    server = start_server("--tls-cert", c["cert"], "--tls-key", c["key"])
    url = server.url.replace("http://", "https://")

    async def run() -> int:
        async with fenecdb.connect_async(url, verify=c["ca"]) as db:
            await db.query("create collection notes (s text)")
            return (await db.query("get notes")).affected

    assert asyncio.run(run()) == 0


def test_threaded_worker_over_https(start_server: StartServer, tmp_path: Path) -> None:
    """The threaded Worker's held claims go over a client of their own: it
    checks the server's certificate as the user's client does (a CA file
    here), or it would claim nothing."""
    import threading

    c = make_certs(tmp_path, "server")
    server = start_server("--tls-cert", c["cert"], "--tls-key", c["key"])
    url = server.url.replace("http://", "https://")
    with fenecdb.connect(url, verify=c["ca"]) as db:
        db.query("create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)")
        for n in range(3):
            db.query("put jobs {payload: $1, run_at: now(), attempts: 0}", [{"n": n}])
        done: List[int] = []
        all_done = threading.Event()

        def handler(row: fenecdb.Row, cancel: threading.Event) -> None:
            done.append(row["payload"]["n"])
            if len(done) == 3:
                all_done.set()

        w = fenecdb.Worker(db.from_("jobs"), handler, wait=1)
        w.start()
        try:
            assert all_done.wait(20), f"the worker ran {done} over https"
        finally:
            w.stop()
        assert sorted(done) == [0, 1, 2]
        assert db.query("get jobs").affected == 0
