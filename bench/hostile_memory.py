"""Memory under unauthenticated connections that announce large frames: odradek beside Apache Kafka.

Usage:  PYTHONPATH=src .venv/bin/python bench/hostile_memory.py [--counts 300,1000] [--no-kafka] [--out-dir DIR]

For each broker (odradek, then Apache Kafka 4.4 from `make reference`), each listener (SASL_PLAINTEXT with
PLAIN, PLAINTEXT) and each count of connections, a fresh broker with default memory settings is started;
then COUNT connections each announce a 100 MiB frame and send 64 KiB of it, and stay open HOLD_S seconds
(or until the broker has read everything they sent, if later). The broker's RSS (VmRSS of its process in
/proc) is taken before, sampled every 20 ms while they are open (the peak is reported), and again SETTLE_S
after they have all closed. Also reported: how many the broker closed itself, and whether a normal client
(ApiVersions on the PLAINTEXT listener) was answered while they were open.

Kafka runs as bench/brokers.py runs it for `make bench` (kafka-server-start.sh's heap and JVM options), with
a PLAIN JAAS config on its SASL_PLAINTEXT listener. The figures go to stdout as a table and to
OUT_DIR/hostile_memory.{md,json}. This is the measurement issue 36 asked for; tests/security/
test_hostile_memory.py asserts bounds of the same kind in the suite.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import brokers  # noqa: E402
from workloads import machine, write_results  # noqa: E402

MB = 1 << 20
ANNOUNCED = 100 * MB
SENT = 64 * 1024
HOLD_S = 5.0
CONNECT_TIMEOUT_S = 3.0
OPEN_CAP_S = 90.0  # connections not opened by then are counted as not connected
SETTLE_S = 10.0
READY_MARKER = "odradek: accepting connections on"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def unread_bytes(port: int) -> int:
    """Bytes the broker has not read yet on its sockets accepted on ``port`` (/proc/net/tcp rx_queue)."""
    total = 0
    with open("/proc/net/tcp") as fh:
        next(fh)
        for line in fh:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":
                total += int(fields[4].split(":")[1], 16)
    return total


def api_versions_answered(port: int) -> bool:
    header = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(header)) + header)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            return struct.unpack_from(">ih", _recv(sock, size))[1] == 0
    except (OSError, struct.error):
        return False


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return bytes(buf)


def closed_by_peer(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1 << 16) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class Odradek:
    name = "odradek"

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
        self.plain, self.sasl = brokers.free_port(), brokers.free_port()
        cmd = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(self.dir / "data"),
               "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl}",
               "--set", "sasl.enabled.mechanisms=PLAIN",
               "--set", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}"]
        self.log = open(self.dir / "broker.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"odradek exited: {(self.dir / 'broker.log').read_text()[-2000:]}")
            if line.startswith(READY_MARKER):
                break
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Kafka:
    name = "kafka"

    def __init__(self) -> None:
        ref = brokers.reference_kafka()
        status = ref.install_status()
        if not status.installed:
            raise RuntimeError(status.reason)
        self.plain, self.sasl, controller = brokers.free_port(), brokers.free_port(), brokers.free_port()
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl},"
                         f"CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                              "CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        }
        self.kafka = ref.KafkaReference(status.libs, port=self.plain, settings=settings, heap=brokers.KAFKA_HEAP,
                                        jvm_options=brokers.KAFKA_JVM_OPTIONS, controller_port=controller)
        try:
            self.kafka.start(brokers.KAFKA_START_TIMEOUT_S)
        except RuntimeError:  # a JVM start on a loaded 2-core machine: one more try
            self.kafka.stop()
            self.kafka.start(2 * brokers.KAFKA_START_TIMEOUT_S)
        self.pid = self.kafka.proc.pid

    def stop(self) -> None:
        self.kafka.stop()


class PeakSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._stop_event = pid, 0, threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.peak = max(self.peak, rss(self.pid))
            except OSError:
                return
            self._stop_event.wait(0.02)

    def stop(self) -> int:
        self._stop_event.set()
        self.join(5)
        return self.peak


def scenario(broker_cls, listener: str, count: int) -> dict:
    broker = broker_cls()
    try:
        port = broker.sasl if listener == "SASL_PLAINTEXT" else broker.plain
        for _ in range(3):
            api_versions_answered(broker.plain)
        time.sleep(1.0)
        before = rss(broker.pid)
        sampler = PeakSampler(broker.pid)
        sampler.start()
        socks: list[socket.socket] = []
        started = time.monotonic()
        payload = struct.pack(">i", ANNOUNCED) + bytes(SENT)
        refused = 0  # connections the broker did not accept (or accepted too slowly) within CONNECT_TIMEOUT_S
        try:
            for _ in range(count):
                if time.monotonic() - started > OPEN_CAP_S:
                    refused += 1
                    continue
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
                except OSError:
                    refused += 1
                    continue
                sock.settimeout(CONNECT_TIMEOUT_S)
                try:
                    sock.sendall(payload)
                except OSError:
                    pass
                socks.append(sock)
            opened_s = time.monotonic() - started
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and unread_bytes(port) > 0:
                time.sleep(0.05)
            time.sleep(max(0.0, HOLD_S - (time.monotonic() - started)))
            served = api_versions_answered(broker.plain)
            closed = sum(closed_by_peer(s) for s in socks)
        finally:
            for sock in socks:
                sock.close()
        peak = sampler.stop()
        time.sleep(SETTLE_S)
        after = rss(broker.pid)
        alive = api_versions_answered(broker.plain)
        return {"broker": broker.name, "listener": listener, "connections": count, "rss_before": before,
                "rss_peak": peak, "rss_after": after, "closed_by_broker": closed, "not_connected": refused,
                "client_served": served,
                "alive_after": alive, "open_seconds": round(opened_s, 2)}
    finally:
        broker.stop()


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def report(rows: list[dict]) -> str:
    lines = ["| broker | listener | connections | RSS before | RSS peak | RSS after | closed by broker | "
             "not connected | client served | alive after |", "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['broker']} | {r['listener']} | {r['connections']} | {r['error']} | | | | | | |")
            continue
        lines.append(f"| {r['broker']} | {r['listener']} | {r['connections']} | {r['rss_before'] / MB:.0f} MB | "
                     f"{r['rss_peak'] / MB:.0f} MB | {r['rss_after'] / MB:.0f} MB | {r['closed_by_broker']} | "
                     f"{r['not_connected']} | {yes_no(r['client_served'])} | {yes_no(r['alive_after'])} |")
    return "\n".join(lines) + "\n"


def print_table(rows: list[dict]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        return
    table = Table(title="Broker RSS under connections announcing 100 MiB frames and sending 64 KiB")
    for column in ("broker", "listener", "connections", "RSS before", "RSS peak", "RSS after", "closed by broker",
                   "not connected", "client served", "alive after"):
        table.add_column(column, justify="right" if column.startswith(("RSS", "conn", "closed", "not")) else "left")
    for r in rows:
        if "error" in r:
            table.add_row(r["broker"], r["listener"], str(r["connections"]), r["error"], "", "", "", "", "", "")
        else:
            table.add_row(r["broker"], r["listener"], str(r["connections"]), f"{r['rss_before'] / MB:.0f} MB",
                          f"{r['rss_peak'] / MB:.0f} MB", f"{r['rss_after'] / MB:.0f} MB", str(r["closed_by_broker"]),
                          str(r["not_connected"]), yes_no(r["client_served"]), yes_no(r["alive_after"]))
    Console(stderr=True, width=160).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="300,1000", help="connection counts, comma-separated")
    parser.add_argument("--no-kafka", action="store_true", help="odradek only")
    parser.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(counts) * 2 + 256  # this process's sockets; the brokers inherit the raised limit
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    rows = []
    for broker_cls in (Odradek,) if args.no_kafka else (Odradek, Kafka):
        for listener in ("SASL_PLAINTEXT", "PLAINTEXT"):
            for count in counts:
                print(f"{broker_cls.name} {listener} {count}…", file=sys.stderr, flush=True)
                try:
                    rows.append(scenario(broker_cls, listener, count))
                except Exception as exc:  # a broker that cannot start is reported, the run goes on
                    rows.append({"broker": broker_cls.name, "listener": listener, "connections": count,
                                 "error": str(exc)[:200]})
    print_table(rows)
    about = machine()
    text = (f"# Broker memory under hostile connections\n\n{count_note(counts)}\n\n{report(rows)}\n"
            f"Machine: {', '.join(f'{k}={v}' for k, v in about.items())}\n")
    write_results(args.out_dir, "hostile_memory", text, {"machine": about, "rows": rows,
                                                         "announced_bytes": ANNOUNCED, "sent_bytes": SENT,
                                                         "hold_seconds": HOLD_S, "settle_seconds": SETTLE_S})


def count_note(counts: list[int]) -> str:
    return (f"Each of {', '.join(map(str, counts))} connections announces a {ANNOUNCED // MB} MiB frame and sends "
            f"{SENT // 1024} KiB; default memory settings; RSS after is {SETTLE_S:.0f} s after they closed.")


if __name__ == "__main__":
    main()
