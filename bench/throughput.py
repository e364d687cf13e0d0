"""Throughput benchmark for odradek, driven by a real Kafka client (confluent-kafka / librdkafka).

Usage:  .venv/bin/python bench/throughput.py [--quick] [--bootstrap HOST:PORT] [--json out.json]

Without --bootstrap it starts its own broker (`python -m odradek serve`) on a free loopback port with
a temporary data directory (disk log, default flush policy), times spawn-to-ready, and stops it with
SIGTERM at the end. For each record size (100 B and 1 KiB) on a fresh single-partition topic it measures:

  produce acks=1    Producer(acks=1, linger.ms=5, batch.size=1 MB, no compression): produce() + poll(0)
                    as fast as possible, retrying on BufferError, then flush(); only delivered records count.
  consume           Consumer by assign() from offset 0 of the acks=1 topic until every delivered record
                    has been read and checked (small fetch.min.bytes / fetch.wait.max.ms, large fetch sizes).
  produce acks=all  As produce acks=1, into a second topic, with acks=all.

Each workload is capped both in records and in wall time (20 s; --quick divides both by 5). A capped
workload reports what it managed in the time. MB/s is payload bytes / s with 1 MB = 10^6 B.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY_MARKER = "odradek: accepting connections on"
SIZES = (100, 1024)
FULL_RECORDS = {100: 2_000_000, 1024: 500_000}
FULL_TIME_CAP_S = 20.0
QUICK_FACTOR = 5
READY_TIMEOUT_S = 30.0


class OwnBroker:
    """A broker subprocess on 127.0.0.1 (port chosen by the OS) with a throwaway data directory."""

    def __init__(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="odradek-bench-")
        self.stderr = open(os.path.join(self.tmp, "broker.log"), "w+b")
        self.ready = threading.Event()
        self.address: str | None = None
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "serve", "--listen", "127.0.0.1:0",
             "--data-dir", os.path.join(self.tmp, "data"), "--log-level", "WARNING"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        threading.Thread(target=self._drain_stdout, daemon=True).start()
        if not self.ready.wait(READY_TIMEOUT_S) or self.address is None:
            why = "exited" if self.proc.poll() is not None else f"not ready after {READY_TIMEOUT_S:.0f} s"
            tail = self.log_tail()
            self.stop()
            raise SystemExit(f"broker {why}; its log:\n{tail}")
        self.ready_s = self.ready_at - t0

    def _drain_stdout(self) -> None:
        for line in self.proc.stdout:  # keep reading so the pipe never fills
            if not self.ready.is_set() and line.startswith(READY_MARKER):
                self.ready_at = time.perf_counter()
                self.address = line[len(READY_MARKER):].strip()
                self.ready.set()
        self.ready.set()  # EOF: the broker exited (address stays None if it never got ready)

    def log_tail(self, limit: int = 4000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-limit:]

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                print("warning: broker ignored SIGTERM for 10 s and was killed", file=sys.stderr)
        self.stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return self.proc.returncode


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)],
                                      operation_timeout=10).values():
        future.result(timeout=15)


def make_payload(size: int) -> bytes:
    """Incompressible, but the same on both sides so the consumer can check what it reads."""
    return random.Random(size).randbytes(size)


def produce(bootstrap: str, topic: str, size: int, count: int, cap_s: float, acks: str) -> dict:
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1_000_000,
        "compression.type": "none", "enable.idempotence": False,
        "queue.buffering.max.messages": 500_000, "message.timeout.ms": int(cap_s * 1000) + 30_000})
    payload = make_payload(size)
    state = {"delivered": 0, "failed": 0, "first_error": None}

    def on_delivery(err, _msg) -> None:
        if err is None:
            state["delivered"] += 1
        else:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or str(err)

    producer.list_topics(topic, timeout=10)  # connect and load metadata before the clock starts
    start = time.perf_counter()
    deadline = start + cap_s
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        try:
            producer.produce(topic, payload, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.001)  # local queue full: wait for deliveries to drain it
            continue
        producer.poll(0)
    producer.flush(max(0.0, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - start
    result = {"records": state["delivered"], "seconds": elapsed, "capped": state["delivered"] < count,
              "failed": state["failed"], "first_error": state["first_error"]}
    if len(producer):  # cap reached with records still in flight: drop them, they are not counted
        producer.purge()
        producer.flush(5)
    return result


def consume(bootstrap: str, topic: str, size: int, count: int, cap_s: float) -> dict:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "fetch.min.bytes": 1, "fetch.wait.max.ms": 10,
        "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "receive.message.max.bytes": 100 * 1024 * 1024, "queued.max.messages.kbytes": 256 * 1024,
        "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10})  # no 1 s stall on a full queue
    # Connect to the leader and look up the first offset before the clock starts (otherwise
    # librdkafka's offset query races the connection and retries after ~0.5 s).
    low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    start = time.perf_counter()
    deadline = start + cap_s
    consumer.assign([TopicPartition(topic, 0, low)])
    payload = make_payload(size)
    got = errors = corrupt = 0
    first_error = None
    while got < count and time.perf_counter() < deadline:
        for msg in consumer.consume(num_messages=10_000, timeout=0.2):
            if msg.error():
                errors += 1
                first_error = first_error or str(msg.error())
            else:
                got += 1
                corrupt += msg.value() != payload
    elapsed = time.perf_counter() - start
    consumer.close()
    if corrupt:
        first_error = first_error or f"{corrupt} records read back with a different payload"
    return {"records": got, "seconds": elapsed, "capped": got < count,
            "failed": errors, "first_error": first_error}


def run(bootstrap: str, quick: bool) -> list[dict]:
    cap_s = FULL_TIME_CAP_S / QUICK_FACTOR if quick else FULL_TIME_CAP_S
    run_id = uuid.uuid4().hex[:8]
    rows = []
    for size in SIZES:
        count = FULL_RECORDS[size] // QUICK_FACTOR if quick else FULL_RECORDS[size]
        label = f"{size} B" if size < 1024 else f"{size // 1024} KiB"
        topic = {acks: f"bench-{run_id}-{size}b-acks{acks}" for acks in ("1", "all")}
        for name in topic.values():
            create_topic(bootstrap, name)
        for workload in (f"produce {label} acks=1", f"consume {label}", f"produce {label} acks=all"):
            if workload.startswith("consume"):  # read back exactly what the acks=1 run delivered
                target = rows[-1]["records"]
                result = consume(bootstrap, topic["1"], size, target, cap_s)
            else:
                acks = workload.rsplit("=", 1)[1]
                target = count
                result = produce(bootstrap, topic[acks], size, count, cap_s, acks)
            secs = result["seconds"]
            result.update(workload=workload, record_size=size, target=target,
                          msgs_per_s=result["records"] / secs if secs > 0 else 0.0,
                          mb_per_s=result["records"] * size / secs / 1e6 if secs > 0 else 0.0)
            rows.append(result)
            print(f"  {workload}: {result['records']:,} records in {secs:.2f} s", file=sys.stderr)
    return rows


def machine() -> dict:
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "nproc": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0]}


def print_report(info: dict, rows: list[dict], ready_s: float | None, quick: bool) -> None:
    print(f"# odradek throughput{' (--quick)' if quick else ''}\n")
    print(f"- date: {info['date']}\n- nproc: {info['nproc']}\n- python: {info['python']} ({info['platform']})")
    print(f"- client: confluent-kafka {info['confluent_kafka']} / librdkafka {info['librdkafka']}")
    print(f"- broker: {info['broker']}\n")
    print("| workload | records | seconds | msgs/s | MB/s |\n|---|---:|---:|---:|---:|")
    if ready_s is not None:
        print(f"| broker start-to-ready | – | {ready_s:.3f} | – | – |")
    for r in rows:
        records = f"{r['records']:,}" + (f" of {r['target']:,} (time cap)" if r["capped"] else "")
        print(f"| {r['workload']} | {records} | {r['seconds']:.2f} | {r['msgs_per_s']:,.0f} | {r['mb_per_s']:.2f} |")
    for r in rows:
        if r["failed"] or r["first_error"]:
            print(f"\n! {r['workload']}: {r['failed']} failed, first error: {r['first_error']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~5x fewer records and less time per workload")
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="use a running broker instead of starting one")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()
    info = machine()
    broker = None
    ready_s = None
    if args.bootstrap:
        bootstrap = args.bootstrap
        info["broker"] = f"external at {bootstrap}"
    else:
        broker = OwnBroker()
        bootstrap, ready_s = broker.address, broker.ready_s
        info["broker"] = "own subprocess, temp data dir, default flush policy"
    try:
        rows = run(bootstrap, args.quick)
    except KafkaException as exc:
        if broker is not None:
            print(f"broker log tail:\n{broker.log_tail()}", file=sys.stderr)
        raise SystemExit(f"benchmark failed: {exc}")
    finally:
        code = broker.stop() if broker is not None else None
    if code not in (None, 0):
        print(f"warning: broker exited with status {code} after SIGTERM", file=sys.stderr)
    print_report(info, rows, ready_s, args.quick)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "quick": args.quick, "broker_ready_s": ready_s, "results": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
