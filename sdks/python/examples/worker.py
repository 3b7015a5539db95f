"""Sends each job's mail until SIGTERM or Ctrl-C, then stops gracefully.

    FENEC_URL=http://127.0.0.1:8080 FENEC_TOKEN=… python worker.py
"""

import os
import signal
import sys
import threading

import fenecdb


def send_mail(job: fenecdb.Row, cancel: threading.Event) -> None:
    sys.stdout.write(f"mail to {job['payload']['to']}\n")  # one write: handlers run in threads at once
    sys.stdout.flush()


def main() -> None:
    url = os.environ.get("FENEC_URL", "http://127.0.0.1:8080")
    with fenecdb.connect(url, token=os.environ.get("FENEC_TOKEN")) as db:
        worker = fenecdb.Worker(db.from_("jobs"), send_mail, concurrency=10)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        worker.start()
        stop.wait()
        worker.stop()


if __name__ == "__main__":
    main()
