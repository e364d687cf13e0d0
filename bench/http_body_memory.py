"""The schema registry's memory under oversized request bodies: RSS of `odradek registry` before, at peak and
after bodies of `--mib` MiB sent once with a Content-Length and once chunked.

    PYTHONPATH=src .venv/bin/python bench/http_body_memory.py [--mib 200]

One broker and one registry on free loopback ports (started here, stopped at the end). Each body is streamed
until the registry answers (413 past `--max-request-bytes`, 4 MiB by default); VmRSS and VmHWM (the peak)
come from /proc. Run with PYTHONPATH pointing at an older tree to see the figure before the limit (docs/
schema-registry.md has both). Prints one line; not part of `make bench`.
"""

from __future__ import annotations

import argparse
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workloads import READY_MARKER

REGISTRY_READY = "odradek registry: listening on "
MIB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], log: Path, marker: str) -> subprocess.Popen:
    out = open(log, "w")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while marker not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{cmd[3]} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    return proc


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def send_body(port: int, total: int, chunked: bool) -> str:
    head = (f"POST /subjects/big-value/versions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/vnd.schemaregistry.v1+json\r\n"
            + ("Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {total}\r\n") + "\r\n")
    chunk = b"[" * (256 * 1024)
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head.encode())
        sent = 0
        while sent < total and not select.select([sock], [], [], 0)[0]:
            try:
                sock.sendall(framed)
            except OSError:
                break
            sent += len(chunk)
        try:
            answer = sock.recv(200)
        except OSError:
            answer = b""
    return answer.split(b"\r\n", 1)[0].decode("latin-1") or "(closed)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kafka_port, registry_port = free_port(), free_port()
        broker = start([sys.executable, "-m", "odradek", "serve", "--listen", f"127.0.0.1:{kafka_port}",
                        "--data-dir", f"{tmp}/data"], Path(tmp) / "broker.log", READY_MARKER)
        registry = None
        try:
            registry = start([sys.executable, "-m", "odradek", "registry", "--bootstrap", f"127.0.0.1:{kafka_port}",
                              "--listen", f"127.0.0.1:{registry_port}"], Path(tmp) / "registry.log", REGISTRY_READY)
            before = status_kib(registry.pid, "VmRSS")
            answers = [send_body(registry_port, args.mib * MIB, chunked) for chunked in (False, True)]
            after, peak = status_kib(registry.pid, "VmRSS"), status_kib(registry.pid, "VmHWM")
            print(f"{args.mib} MB bodies answered {answers}; registry RSS before {before / 1024:.1f} MiB, "
                  f"peak {peak / 1024:.1f} MiB, after {after / 1024:.1f} MiB")
        finally:
            for proc in (registry, broker):
                if proc is not None:
                    proc.terminate()
                    proc.wait(30)


if __name__ == "__main__":
    main()
