"""Sends each job's mail until SIGTERM or Ctrl-C, then stops gracefully."""

import asyncio
import os
import signal

import fenecdb


async def send_mail(job: fenecdb.Row) -> None:
    print(f"mail to {job['payload']['to']}", flush=True)


async def main() -> None:
    url = os.environ.get("FENEC_URL", "http://127.0.0.1:8080")
    async with fenecdb.connect_async(url, token=os.environ.get("FENEC_TOKEN")) as db:
        worker = fenecdb.AsyncWorker(db.from_("jobs"), send_mail, concurrency=10)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(worker.stop()))
        await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
