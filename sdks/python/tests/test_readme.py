"""The README as a user meets it: every ``python`` block type-checks under
``mypy --strict`` and runs against a real ``fenec serve``; the worker blocks
are the examples, and run from a wheel installed into a fresh venv outside
the repository: installed as the Python ecosystem installs it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

import fenecdb
from fenecdb import expr

from .conftest import JOBS, Server, StartServer

HERE = Path(__file__).resolve().parents[1]
BLOCKS: List[str] = re.findall(r"^```python\n(.*?)^```$", (HERE / "README.md").read_text(), re.S | re.M)
WORKERS = [b for b in BLOCKS if "signal" in b]
"""The blocks that run until stopped: the README's workers."""


def clean_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "FENEC_TOKEN")}
    env.update(extra)
    return env


def write_blocks(folder: Path) -> List[Path]:
    paths = []
    for i, block in enumerate(BLOCKS):
        path = folder / f"readme_block_{i}.py"
        path.write_text(block)
        paths.append(path)
    return paths


def test_blocks_type_check(tmp_path: Path) -> None:
    assert len(BLOCKS) >= 5 and len(WORKERS) == 2
    paths = write_blocks(tmp_path)
    for p in paths:
        compile(p.read_text(), str(p), "exec")
    # Separate programs (a module each), checked in one run with the
    # package's own mypy cache.
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", *map(str, paths)], capture_output=True, text=True, cwd=HERE)
    assert r.returncode == 0, r.stdout + r.stderr


def test_blocks_run(server: Server, tmp_path: Path) -> None:
    for p in write_blocks(tmp_path):
        if "signal" in p.read_text():
            continue
        r = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=clean_env(FENEC_URL=server.url))
        assert r.returncode == 0, f"{p.name}:\n{p.read_text()}\n{r.stdout}{r.stderr}"


def test_examples_are_the_readme_workers() -> None:
    assert (HERE / "examples" / "worker.py").read_text() == WORKERS[0]
    assert (HERE / "examples" / "worker_async.py").read_text() == WORKERS[1]


def run_worker(python: Path, script: Path, server: Server, n: int) -> str:
    """Runs a worker script until the n jobs are done, then SIGTERM: it
    must stop by itself, cleanly. Answers what it printed."""
    with fenecdb.connect(server.url) as db:
        jobs = db.from_("jobs")
        jobs.insert([{"payload": {"to": f"u{i}@example.com"}, "run_at": expr("now()"), "attempts": 0} for i in range(n)])
        proc = subprocess.Popen(
            [str(python), str(script)],
            cwd=script.parent,
            env=clean_env(FENEC_URL=server.url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while jobs.count() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert jobs.count() == 0, "the worker did not run every job"
            time.sleep(0.2)  # back to a held claim
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    assert sorted(out.split("\n")[:-1]) == sorted(f"mail to u{i}@example.com" for i in range(n)), out + err
    return out


def test_wheel_in_a_fresh_venv(start_server: StartServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The wheel, built as a user builds one and installed into a venv of
    its own, outside the repository, runs the README's workers; the venv
    holds fenecdb's declared dependencies and nothing else, an asyncio
    request finds all it imports (sniffio searched for once, not per
    request), and ``fenecdb.__version__`` is pyproject.toml's."""
    dist = tmp_path_factory.mktemp("dist")
    # Without build isolation: the pinned backend (pyproject.toml) is in the
    # test venv already, and fetching it again would only add time.
    r = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(HERE)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = dist.glob("fenecdb-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        licenses = [n for n in whl.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert licenses and "Apache License" in whl.read(licenses[0]).decode(), "the wheel has no LICENSE"
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True, env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    project = tmp_path_factory.mktemp("project")
    where = subprocess.run(
        [str(python), "-c", "import fenecdb, sys; print(fenecdb.__file__); print(sorted(set(dir(fenecdb)) - set(fenecdb.__all__)))"],
        capture_output=True, text=True, cwd=project, env=clean_env(), check=True,
    ).stdout.split("\n")
    assert where[0].startswith(str(venv)), f"fenecdb imported from {where[0]}, not the venv"
    assert all(n.startswith("_") for n in eval(where[1])), f"stray names: {where[1]}"
    (project / "worker.py").write_text(WORKERS[0])
    (project / "worker_async.py").write_text(WORKERS[1])
    # The installed package's types (py.typed), as the user's mypy sees them.
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-executable", str(python), "worker.py", "worker_async.py"],
        capture_output=True, text=True, cwd=project, env=clean_env(MYPYPATH=""),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    server = start_server("--clock", "system")
    with fenecdb.connect(server.url) as db:
        db.query(JOBS)
    run_worker(python, project / "worker.py", server, 20)
    run_worker(python, project / "worker_async.py", server, 20)
    (project / "deps.py").write_text(DEPS_CHECK)
    r = subprocess.run([str(python), "deps.py"], capture_output=True, text=True, cwd=project, env=clean_env(FENEC_URL=server.url))
    assert r.returncode == 0, r.stdout + r.stderr
    version = re.search(r'^version = "([^"]+)"', (HERE / "pyproject.toml").read_text(), re.M)
    assert version and r.stdout.strip() == version.group(1)


DEPS_CHECK = """\
import asyncio, importlib.metadata as md, re, sys

import fenecdb


def key(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(name, seen):
    # The distributions a requirement pulls in (extras left out; one whose
    # marker does not hold here is not installed, and is skipped).
    if key(name) in seen:
        return
    try:
        requires = md.requires(name) or []
    except md.PackageNotFoundError:
        return
    seen.add(key(name))
    for req in requires:
        if "extra ==" not in req:
            closure(re.split(r"[ ;<>=!~\\[(]", req, maxsplit=1)[0], seen)


declared = set()
closure("fenecdb", declared)
installed = {key(d.metadata["Name"]) for d in md.distributions()} - {"pip", "setuptools", "wheel"}
assert installed == declared, f"installed {sorted(installed)}, declared {sorted(declared)}"
assert "sniffio" in declared, declared

searched = []


class Spy:
    # Asked each time `import sniffio` is not answered from sys.modules:
    # once when it is installed, on every request when it is not.
    def find_spec(self, name, path=None, target=None):
        if name == "sniffio":
            searched.append(name)
        return None


sys.meta_path.insert(0, Spy())


async def main():
    async with fenecdb.connect_async() as db:
        for _ in range(5):
            await db.query("get jobs limit 1")


asyncio.run(main())
assert len(searched) <= 1, f"sniffio looked for {len(searched)} times in 5 requests"
print(fenecdb.__version__)
"""
