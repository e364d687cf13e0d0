"""What security costs: 1 KiB produce and consume over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners of
one broker, and the broker's memory with 1,000 idle TLS connections.

    .venv/bin/python bench/security.py [--count 200000] [--connections 1000]

One broker serves the three listeners (certificates made here with the `cryptography` package, as the tests
make theirs); each listener gets its own topic, written with acks=1 by one librdkafka producer and read
back by one consumer (bench/workloads.py). TLS cannot use sendfile(2): a fetch's records are read from the
page cache and encrypted in the broker. The idle connections are TLS handshakes made from this process;
the broker's resident memory (VmRSS) is read before and after. Writes bench/results/security.md; `make bench`
runs it too (bench/compare.py, its "security" part).
Targets (issue 16): TLS consume >= 50 % of plaintext consume; RSS with 1,000 TLS connections <= 150 MB.
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from workloads import READY_MARKER, REPO, consume, create_topic, produce, rates

sys.path.insert(0, REPO)  # the tests' certificate authority
from tests.security.certs import TestCA  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class SecuredBroker:
    def __init__(self, workdir: Path) -> None:
        ca = TestCA()
        self.ca_file = ca.truststore(workdir / "ca.pem")
        keystore = ca.issue("broker", server=True).keystore(workdir / "broker.pem")
        self.ports = {"PLAINTEXT": free_port(), "SSL": free_port(), "SASL_SSL": free_port()}
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        cmd = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(workdir / "data"), "--log-level", "WARNING",
               "--set", f"listeners={listeners}", "--set", f"ssl.keystore.location={keystore}",
               "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512"]
        self.log = open(workdir / "broker.log", "w")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=self.log, text=True)
        ready = threading.Event()

        def drain() -> None:
            for line in self.proc.stdout:
                if line.startswith(READY_MARKER):
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(30) or self.proc.poll() is not None:
            raise SystemExit(f"broker did not start; see {workdir / 'broker.log'}")
        admin = AdminClient({"bootstrap.servers": self.bootstrap("PLAINTEXT"), "broker.address.family": "v4"})
        user = UserScramCredentialUpsertion("bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                            b"bench-secret")
        for future in admin.alter_user_scram_credentials([user]).values():
            future.result(10)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client_config(self, listener: str) -> dict:
        config = {"broker.address.family": "v4"}
        if listener in ("SSL", "SASL_SSL"):
            config.update({"security.protocol": listener, "ssl.ca.location": str(self.ca_file)})
        if listener == "SASL_SSL":
            config.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                           "sasl.password": "bench-secret"})
        return config

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def idle_tls_connections(broker: SecuredBroker, count: int) -> dict:
    context = ssl.create_default_context(cafile=str(broker.ca_file))
    before = rss_mb(broker.proc.pid)
    held = []
    start = time.perf_counter()
    try:
        for _ in range(count):
            raw = socket.create_connection(("127.0.0.1", broker.ports["SSL"]), timeout=10)
            held.append(context.wrap_socket(raw, server_hostname="127.0.0.1"))
        made_s = time.perf_counter() - start
        time.sleep(1.0)  # the broker settles (its side of the last handshakes)
        after = rss_mb(broker.proc.pid)
    finally:
        for sock in held:
            sock.close()
    return {"connections": len(held), "rss_before_mb": before, "rss_after_mb": after,
            "per_connection_kb": (after - before) * 1024 / max(len(held), 1), "handshakes_per_s": len(held) / made_s}


def run(count: int, connections: int) -> dict:
    """Measure every listener and the idle connections; the part of the report that render() writes."""
    size = 1024
    with tempfile.TemporaryDirectory(prefix="odradek-security-") as tmp:
        broker = SecuredBroker(Path(tmp))
        try:
            rows = []
            for listener in ("PLAINTEXT", "SSL", "SASL_SSL"):
                topic = f"bench-{listener.lower()}"
                create_topic(broker.bootstrap("PLAINTEXT"), topic, 1)
                config = broker.client_config(listener)
                p = rates(produce(broker.bootstrap(listener), topic, size, count, 60.0, "1", config=config,
                                  broker_pid=broker.proc.pid), size)
                c = rates(consume(broker.bootstrap(listener), topic, size, count, 60.0,
                                  broker_pid=broker.proc.pid, config=config), size)
                rows.append({"listener": listener, "produce": p, "consume": c})
                print(f"{listener:10} produce {p['msgs_per_s']:>10,.0f} msgs/s {p['mb_per_s']:7.1f} MB/s   "
                      f"consume {c['msgs_per_s']:>10,.0f} msgs/s {c['mb_per_s']:7.1f} MB/s", flush=True)
            idle = idle_tls_connections(broker, connections)
            print(f"{idle['connections']} idle TLS connections: broker RSS {idle['rss_before_mb']:.0f} -> "
                  f"{idle['rss_after_mb']:.0f} MB ({idle['per_connection_kb']:.0f} KB each), "
                  f"{idle['handshakes_per_s']:.0f} handshakes/s", flush=True)
        finally:
            broker.stop()
    return {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "count": count, "rows": rows, "idle": idle}


def render(part: dict) -> str:
    rows, idle = part["rows"], part["idle"]
    plain_consume = rows[0]["consume"]["msgs_per_s"]
    lines = ["## Security costs (bench/security.py)", "",
             f"{part['when']}; 1 KiB records, {part['count']:,} per listener, one producer (acks=1) and one "
             "consumer; one broker serving all three listeners.", "",
             "| listener | produce msgs/s | produce MB/s | consume msgs/s | consume MB/s | consume vs plaintext |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        p, c = row["produce"], row["consume"]
        lines.append(f"| {row['listener']} | {p['msgs_per_s']:,.0f} | {p['mb_per_s']:.1f} | {c['msgs_per_s']:,.0f} | "
                     f"{c['mb_per_s']:.1f} | {c['msgs_per_s'] / plain_consume:.2f}x |")
    lines += ["", f"{idle['connections']:,} idle TLS connections: broker RSS {idle['rss_before_mb']:.0f} MB before, "
              f"{idle['rss_after_mb']:.0f} MB with them ({idle['per_connection_kb']:.0f} KB each); "
              f"{idle['handshakes_per_s']:.0f} handshakes/s from one Python client.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200_000, help="1 KiB records per listener")
    parser.add_argument("--connections", type=int, default=1000, help="idle TLS connections")
    args = parser.parse_args()
    out = Path(REPO) / "bench" / "results" / "security.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(render(run(args.count, args.connections)))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
