"""What the Prometheus metrics cost: produce and consume throughput of one broker with `metrics.listen` set and
unset.

    .venv/bin/python bench/metrics.py [--count 1000000] [--size 100] [--rounds 4] [--scrape-interval 1.0]

Each round starts a fresh broker (disk log, default settings, --log-level WARNING) in each mode, in
alternating order (off then on, then on then off, ...) so that a machine getting busier or quieter weighs on
both alike. In each run one confluent-kafka producer (bench/workloads.py: acks=1, linger.ms 5, no
compression) writes `--count` records of `--size` bytes to a one-partition topic, then one consumer reads them
back from offset 0; every wait is bounded (60 s per workload). With metrics on, a thread of this process
scrapes /metrics every `--scrape-interval` seconds throughout the run (15 times as often as Prometheus'
default), so the figure includes the scrapes' cost too. Small records are the worst case: the most requests
per byte, and the request path is where the metrics add work. The report gives the median of the rounds per
mode and the difference on vs off; it goes to stdout and bench/results/metrics.md (figures in .json).
Target (issue 19): within 3 %.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from workloads import READY_MARKER, REPO, consume, create_topic, machine, produce, rates

import native

READY_TIMEOUT_S = 30.0
CAP_S = 60.0


def log(msg: str) -> None:
    print(f"[metrics] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """One `odradek serve` on loopback, metrics on (a free port for metrics.listen) or off."""

    def __init__(self, metrics: bool) -> None:
        self.tmp = tempfile.mkdtemp(prefix="odradek-bench-metrics-")
        self.port = free_port()
        self.metrics_port = free_port() if metrics else None
        cmd = [sys.executable, "-m", "odradek", "serve", "--listen", f"127.0.0.1:{self.port}",
               "--data-dir", os.path.join(self.tmp, "data"), "--log-level", "WARNING"]
        if metrics:
            cmd += ["--set", f"metrics.listen=127.0.0.1:{self.metrics_port}"]
        self.stderr = open(os.path.join(self.tmp, "broker.log"), "w+b")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith(READY_MARKER):
                threading.Thread(target=self._drain, daemon=True).start()
                return
        self.stop()
        raise SystemExit("broker did not start")

    def _drain(self) -> None:
        for _ in self.proc.stdout:  # keep the pipe from filling
            pass

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Scraper:
    """GET /metrics every `interval` seconds until stopped; counts the scrapes and their bytes."""

    def __init__(self, port: int, interval: float) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.stopped = threading.Event()
        self.scrapes = self.failures = self.bytes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    self.bytes += len(response.read())
                self.scrapes += 1
            except OSError:
                self.failures += 1

    def stop(self) -> dict:
        self.stopped.set()
        self.thread.join(10)
        return {"scrapes": self.scrapes, "scrape_failures": self.failures, "scrape_bytes": self.bytes}


def one_run(metrics: bool, count: int, size: int, scrape_interval: float) -> dict:
    broker = Broker(metrics)
    try:
        topic = "metrics-bench"
        create_topic(broker.bootstrap, topic, 1)
        scraper = Scraper(broker.metrics_port, scrape_interval) if metrics else None
        pid = broker.proc.pid
        p = rates(produce(broker.bootstrap, topic, size, count, CAP_S, "1", broker_pid=pid), size)
        c = rates(consume(broker.bootstrap, topic, size, count, CAP_S, broker_pid=pid), size)
        scraped = scraper.stop() if scraper is not None else {}
        for name, r in (("produce", p), ("consume", c)):
            if r["capped"] or r["failed"]:
                raise SystemExit(f"{name} did not finish: {r['records']} of {count} records, {r['first_error']}")
        # the broker's own CPU per record: less at the mercy of a busy machine than throughput
        per_record = {f"{name}_broker_us": r["broker_cpu_s"] / r["records"] * 1e6
                      for name, r in (("produce", p), ("consume", c)) if r.get("broker_cpu_s") is not None}
        return {"produce": p["msgs_per_s"], "consume": c["msgs_per_s"], **per_record, **scraped}
    finally:
        broker.stop()


def run(count: int, size: int, rounds: int, scrape_interval: float) -> dict:
    part = {**machine(), "count": count, "size": size, "rounds": rounds, "scrape_interval_s": scrape_interval,
            "runs": {"off": [], "on": []}}
    for i in range(rounds):
        for mode in (("off", "on") if i % 2 == 0 else ("on", "off")):
            res = one_run(mode == "on", count, size, scrape_interval)
            part["runs"][mode].append(res)
            log(f"round {i + 1}, metrics {mode}: produce {res['produce']:,.0f} msgs/s, consume "
                f"{res['consume']:,.0f} msgs/s" + (f", {res['scrapes']} scrapes" if mode == "on" else ""))
    keys = ("produce", "consume", "produce_broker_us", "consume_broker_us")
    for mode, runs in part["runs"].items():
        part[mode] = {k: statistics.median(r[k] for r in runs) for k in keys if all(k in r for r in runs)}
    part["on_vs_off_percent"] = {k: (part["on"][k] / part["off"][k] - 1.0) * 100.0
                                 for k in keys if k in part["on"] and k in part["off"]}
    return part


def render(part: dict) -> str:
    lines = ["## Metrics overhead (bench/metrics.py)", "",
             f"{part['date']}; {part['nproc']} cores, load average {part['loadavg_1m']:.2f} at the start; "
             f"confluent-kafka {part['confluent_kafka']} / librdkafka {part['librdkafka']}; "
             f"{part['count']:,} records of {part['size']} B, one producer (acks=1) then one consumer, a fresh "
             f"broker per run, /metrics scraped every {part['scrape_interval_s']:g} s with metrics on; median of "
             f"{part['rounds']} rounds per mode, modes alternating.", "",
             "| | metrics off | metrics on | on vs off | rounds off | rounds on |",
             "|---|---:|---:|---:|---|---|"]
    labels = {"produce": ("produce, msgs/s", "{:,.0f}"), "consume": ("consume, msgs/s", "{:,.0f}"),
              "produce_broker_us": ("produce, broker CPU µs/record", "{:.2f}"),
              "consume_broker_us": ("consume, broker CPU µs/record", "{:.2f}")}
    for k, (label, fmt) in labels.items():
        if k not in part["on_vs_off_percent"]:
            continue
        off = ", ".join(fmt.format(r[k]) for r in part["runs"]["off"])
        on = ", ".join(fmt.format(r[k]) for r in part["runs"]["on"])
        lines.append(f"| {label} | {fmt.format(part['off'][k])} | {fmt.format(part['on'][k])} | "
                     f"{part['on_vs_off_percent'][k]:+.1f} % | {off} | {on} |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="records per workload")
    parser.add_argument("--size", type=int, default=100, help="bytes per record")
    parser.add_argument("--rounds", type=int, default=4, help="runs per mode, alternating (median)")
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between scrapes, metrics on")
    args = parser.parse_args()
    return native.publish("metrics", run(args.count, args.size, args.rounds, args.scrape_interval), render)


if __name__ == "__main__":
    sys.exit(main())
