"""`make pipeline-cluster`: the clickstream pipeline on a Spark standalone cluster, everything on this
machine, for a user to watch.

    python tools/pipeline_cluster.py [--bootstrap HOST:PORT] [--workers 2] [--dir data/pipeline-cluster]
                                     [any `odradek pipeline clickstream` option ...]

Without --bootstrap a broker is started first (`odradek serve` on a free loopback port, data and log in
DIR/broker*). Then `odradek pipeline clickstream --standalone-workers N` starts a master and N one-core
workers (logs in DIR/spark/logs), prints the Spark master UI's URL and runs the pipeline on them: live
page views into `pageviews`, per-minute counts into `pageviews-per-minute` and DIR/output. Ctrl-C stops
the queries, then the Spark cluster, then the broker.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from odradek.pipelines import run_pipeline
from odradek.tools.cluster import LocalBroker

BROKER_START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data: Path) -> LocalBroker:
    """A single-node broker on a free loopback port; SystemExit with its log's tail if it does not start."""
    broker = LocalBroker(1, "127.0.0.1", free_port(), data / "broker", data / "broker.log", [])
    broker.start()
    deadline = time.monotonic() + BROKER_START_TIMEOUT_S
    while not broker.ready.wait(0.2):
        if broker.exit_code() is not None or time.monotonic() >= deadline:
            broker.terminate()
            sys.exit(f"the broker did not start (log {broker.log_path}):\n{broker.log_tail()}")
    return broker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="a running broker (default: start one here)")
    parser.add_argument("--workers", type=int, default=2, help="Spark workers, one core each (default %(default)s)")
    parser.add_argument("--dir", type=Path, default=Path("data/pipeline-cluster"),
                        help="broker data, Spark logs, checkpoints and output (default %(default)s)")
    args, pipeline_args = parser.parse_known_args(argv)
    data = args.dir.absolute()
    broker = None
    # Ctrl-C before the pipeline runs (while the broker starts) leaves through the finally below
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        if args.bootstrap is None:
            broker = start_broker(data)
            print(f"odradek broker on {broker.address} (log {broker.log_path})", flush=True)
        bootstrap = args.bootstrap or broker.address
        return run_pipeline("clickstream", [
            "--bootstrap", bootstrap, "--standalone-workers", str(args.workers),
            "--standalone-dir", str(data / "spark"), "--output", str(data / "output"),
            "--checkpoint", str(data / "checkpoints"), *pipeline_args])
    except KeyboardInterrupt:
        return 130
    finally:
        if broker is not None and broker.proc is not None:
            broker.terminate()
            try:
                broker.proc.wait(30)
            except subprocess.TimeoutExpired:
                broker.proc.kill()
                broker.proc.wait()


if __name__ == "__main__":
    sys.exit(main())
