"""Seconds from `odradek pipeline clickstream` starting (as `make pipeline` runs it, with the broker already up,
as after `make run`) to its first closed window on screen, and to Ctrl-C's exit.

    python bench/pipeline_first_window.py [--runs 1] [--bootstrap HOST:PORT]

Without --bootstrap it starts `odradek serve` on a free loopback port with a fresh data directory (the topics
empty, as on a fresh clone). The pipeline runs with its defaults (generator at 50 page views/s, 1-minute
watermark, 10 s trigger), stdout a pipe (one line per window: the live view shows a window at the same moment,
both read it back from the output topic); its checkpoint and output in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"no broker on 127.0.0.1:{port} after {timeout_s:.0f} s")


def one_run(bootstrap: str, work: Path, deadline_s: float) -> tuple[float | None, float, int, str]:
    """(seconds to the first window line or None, seconds Ctrl-C took, exit status, output)."""
    cmd = [sys.executable, "-m", "odradek", "pipeline", "clickstream", "--bootstrap", bootstrap,
           "--output", str(work / "parquet"), "--checkpoint", str(work / "cp")]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)
    lines: list[str] = []
    first: list[float] = []
    seen = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(f"{time.monotonic() - began:6.1f}  {line}")
            if line.startswith("window ") and not first:
                first.append(time.monotonic() - began)
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen.wait(deadline_s)
    asked = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(240)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(10)
    return (first[0] if first else None), time.monotonic() - asked, proc.returncode, "".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default=None)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--verbose", action="store_true", help="the pipeline's output too, seconds since its start")
    p.add_argument("--deadline", type=float, default=300.0, help="give up waiting for a window after this")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="pipeline-first-window-") as tmp:
        broker = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            port = free_port()
            broker = subprocess.Popen([sys.executable, "-m", "odradek", "serve", "--listen", f"127.0.0.1:{port}",
                                       "--data-dir", os.path.join(tmp, "data")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_port(port, 60)
            bootstrap = f"127.0.0.1:{port}"
        try:
            for run in range(args.runs):
                work = Path(tmp) / f"run{run}"
                work.mkdir()
                first, stop_s, status, output = one_run(bootstrap, work, args.deadline)
                shown = "none" if first is None else f"{first:.1f} s"
                print(f"run {run + 1}: first window after {shown}; Ctrl-C exit {status} after {stop_s:.1f} s")
                if args.verbose or first is None or status != 0:
                    print(output)
        finally:
            if broker is not None:
                broker.send_signal(signal.SIGTERM)
                try:
                    broker.wait(30)
                except subprocess.TimeoutExpired:
                    broker.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
