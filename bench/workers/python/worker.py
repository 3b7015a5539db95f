"""make worker-bench's Python worker: fenecdb.Worker (threads) or
fenecdb.AsyncWorker (asyncio) on the collection jobs with a handler that
does nothing, at the concurrency given. It prints "ready" as it starts the
worker and stops it gracefully when its stdin is closed.

    python worker.py URL CONCURRENCY threads|asyncio
"""

import asyncio
import sys
import threading

import fenecdb


def threads(url: str, concurrency: int) -> None:
    def handler(row: fenecdb.Row, cancel: threading.Event) -> None:
        pass

    with fenecdb.connect(url) as db:
        worker = fenecdb.Worker(db.from_("jobs"), handler, concurrency=concurrency)
        print("ready", flush=True)
        worker.start()
        sys.stdin.read()
        worker.stop()


async def in_asyncio(url: str, concurrency: int) -> None:
    async def handler(row: fenecdb.Row) -> None:
        pass

    async with fenecdb.connect_async(url) as db:
        worker = fenecdb.AsyncWorker(db.from_("jobs"), handler, concurrency=concurrency)
        loop = asyncio.get_running_loop()

        async def stop_on_eof() -> None:
            await loop.run_in_executor(None, sys.stdin.read)
            await worker.stop()

        stopping = asyncio.ensure_future(stop_on_eof())
        print("ready", flush=True)
        await worker.run()
        await stopping


def main() -> None:
    url, concurrency, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "threads":
        threads(url, concurrency)
    else:
        asyncio.run(in_asyncio(url, concurrency))


if __name__ == "__main__":
    main()
