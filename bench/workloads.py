"""Client-side workloads shared by the benchmark scripts (confluent-kafka / librdkafka).

Every function takes a bootstrap address and works against any Kafka-compatible broker; every wait is
bounded. Imported by bench/throughput.py (single broker), bench/compare.py (side by side with peers) and
the other bench scripts (`from throughput import OwnBroker, create_topic, make_payload` keeps working:
throughput.py re-exports these names).
"""

from __future__ import annotations

import datetime
import logging
import multiprocessing
import os
import platform
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from array import array

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY_MARKER = "odradek: accepting connections on"
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


class ClientLog(logging.Handler):
    """Collects librdkafka's warnings and errors for one client (passed as its `logger`), so that
    failures librdkafka only logs (e.g. an oversized fetch response) can be reported, not lost."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"bench.rdkafka.{uuid.uuid4().hex[:8]}")
        self.logger.propagate = False
        self.logger.setLevel(logging.WARNING)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if len(self.lines) < 50 and text not in self.lines:
            self.lines.append(text)

    def summary(self) -> str | None:
        if not self.lines:
            return None
        more = f" (+{len(self.lines) - 1} more distinct lines)" if len(self.lines) > 1 else ""
        return self.lines[0] + more


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                      operation_timeout=10).values():
        future.result(timeout=15)


def make_payload(size: int) -> bytes:
    """Incompressible, but the same on both sides so the consumer can check what it reads."""
    return random.Random(size).randbytes(size)


def size_label(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size // 1024} KiB"


def machine() -> dict:
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "nproc": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0],
            "loadavg_1m": round(os.getloadavg()[0], 2)}


# --------------------------------------------------------------------------------------------------
# Throughput


def produce(bootstrap: str, topic: str, size: int, count: int, cap_s: float, acks: str) -> dict:
    """Produce `count` records of `size` random bytes (no key, default partitioner) as fast as possible.

    The producer connects and loads metadata before the clock starts; time runs from the first produce()
    to the end of flush(); only records whose delivery report succeeded count.
    """
    client_log = ClientLog()
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1_000_000,
        "compression.type": "none", "enable.idempotence": False,
        "queue.buffering.max.messages": 500_000, "message.timeout.ms": int(cap_s * 1000) + 30_000,
        "logger": client_log.logger})
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
              "failed": state["failed"], "first_error": state["first_error"], "client_log": client_log.summary()}
    if len(producer):  # cap reached with records still in flight: drop them, they are not counted
        producer.purge()
        producer.flush(5)
    return result


def consume(bootstrap: str, topic: str, size: int, count: int, cap_s: float, partitions: int = 1) -> dict:
    """Read `count` records from offset 0 of every partition by assign(), checking each payload."""
    client_log = ClientLog()
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "fetch.min.bytes": 1, "fetch.wait.max.ms": 10,
        "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "receive.message.max.bytes": 100 * 1024 * 1024, "queued.max.messages.kbytes": 256 * 1024,
        "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10,  # no 1 s stall on a full queue
        "logger": client_log.logger})
    # Connect to the leader and look up the first offsets before the clock starts (otherwise
    # librdkafka's offset query races the connection and retries after ~0.5 s).
    lows = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0] for p in range(partitions)]
    start = time.perf_counter()
    deadline = start + cap_s
    consumer.assign([TopicPartition(topic, p, low) for p, low in enumerate(lows)])
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
            "failed": errors, "first_error": first_error, "client_log": client_log.summary()}


def rates(result: dict, size: int) -> dict:
    secs = result["seconds"]
    result["msgs_per_s"] = result["records"] / secs if secs > 0 else 0.0
    result["mb_per_s"] = result["records"] * size / secs / 1e6 if secs > 0 else 0.0
    return result


# --------------------------------------------------------------------------------------------------
# End-to-end latency at a fixed rate

_STAMP = 16  # payload starts with 8 bytes send time (CLOCK_MONOTONIC ns, system-wide) + 8 bytes sequence


def _latency_consumer(bootstrap: str, topic: str, expected: int, skip: int, cap_s: float,
                      ready, results) -> None:
    """Runs in a child process so its Python work never competes with the paced producer for the GIL."""
    try:
        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-lat-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "fetch.min.bytes": 1, "fetch.wait.max.ms": 100})
        low = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
        consumer.assign([TopicPartition(topic, 0, low)])
        consumer.consume(num_messages=1, timeout=0.5)  # first fetch issued: the consumer is waiting
        ready.set()
        lat = array("q")
        got = 0
        first_error = None
        deadline = time.monotonic() + cap_s
        while got < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.1)  # returns as soon as a record is there (consume() waits for a batch)
            now = time.monotonic_ns()
            if msg is not None:
                if msg.error():
                    first_error = first_error or str(msg.error())
                    continue
                value = msg.value()
                got += 1
                if int.from_bytes(value[8:16], "little") >= skip:
                    lat.append(now - int.from_bytes(value[:8], "little"))
        consumer.close()
        results.put({"received": got, "latencies": lat.tobytes(), "first_error": first_error})
    except Exception as exc:  # report, never hang the parent
        ready.set()
        results.put({"received": 0, "latencies": b"", "first_error": f"{type(exc).__name__}: {exc}"})


def percentile(sorted_values, q: float):
    if not sorted_values:
        return None
    index = max(0, min(len(sorted_values) - 1, int(q * len(sorted_values) + 0.999999) - 1))
    return sorted_values[index]


def latency(bootstrap: str, topic: str, rate: int, seconds: float, warmup_s: float, size: int = 100) -> dict:
    """One producer (linger.ms=0, acks=all) sends `rate` records/s for `seconds`, each stamped with its
    send time; a consumer in another process (assign(), fetch.wait.max.ms=100) records receive - send.
    The first `warmup_s` of records are not counted. Latency figures are in milliseconds."""
    total = int(rate * seconds)
    skip = int(rate * warmup_s)
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_latency_consumer, daemon=True,
                        args=(bootstrap, topic, total, skip, seconds + 20.0, ready, results))
    child.start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "message.timeout.ms": 15_000})
    state = {"failed": 0, "first_error": None}

    def on_delivery(err, _msg) -> None:
        if err is not None:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or str(err)

    try:
        producer.list_topics(topic, timeout=10)
        if not ready.wait(30):
            raise RuntimeError("latency consumer not ready within 30 s")
        pad = bytes(size - _STAMP)
        start = time.perf_counter()
        sent = 0
        while sent < total:
            due = min(total, int((time.perf_counter() - start) * rate) + 1)
            while sent < due:
                stamp = time.monotonic_ns().to_bytes(8, "little") + sent.to_bytes(8, "little")
                try:
                    producer.produce(topic, stamp + pad, partition=0, on_delivery=on_delivery)
                except BufferError:
                    producer.poll(0.001)
                    continue
                sent += 1
            producer.poll(0)
            lag = (sent / rate) - (time.perf_counter() - start)  # ahead of schedule by this much
            if lag > 0:
                time.sleep(min(lag, 0.001))
        send_s = time.perf_counter() - start
        producer.flush(15)
        try:
            out = results.get(timeout=seconds + 30.0)
        except queue.Empty:
            out = {"received": 0, "latencies": b"", "first_error": "latency consumer returned nothing"}
    finally:
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join()
    lat = array("q")
    lat.frombytes(out["latencies"])
    values = sorted(lat)
    ms = lambda ns: None if ns is None else ns / 1e6  # noqa: E731
    return {"sent": total, "send_rate": total / send_s, "received": out["received"],
            "measured": len(values), "failed": state["failed"],
            "first_error": state["first_error"] or out["first_error"],
            "p50_ms": ms(percentile(values, 0.50)), "p99_ms": ms(percentile(values, 0.99)),
            "p999_ms": ms(percentile(values, 0.999)), "max_ms": ms(values[-1] if values else None)}


# --------------------------------------------------------------------------------------------------
# Consumer group: a lone consumer's first record


def group_first_record(bootstrap: str, topic: str, cap_s: float) -> dict:
    """A consumer with a fresh group.id and librdkafka's default group settings (session.timeout.ms 45 s,
    range/roundrobin assignors, classic protocol), auto.offset.reset=earliest, subscribes to a one-partition
    topic that holds one record. Times from subscribe() to the assignment callback and to the record."""
    client_log = ClientLog()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, b"first", partition=0)
    if producer.flush(15):
        raise RuntimeError("could not produce the record to read")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-grp-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "logger": client_log.logger})
    marks: dict = {}
    first_error = None
    start = time.perf_counter()
    consumer.subscribe([topic], on_assign=lambda _c, _p: marks.setdefault("assigned", time.perf_counter()))
    deadline = start + cap_s
    while "record" not in marks and time.perf_counter() < deadline:
        for msg in consumer.consume(num_messages=1, timeout=0.02):
            if msg.error():
                first_error = first_error or str(msg.error())
            else:
                marks["record"] = time.perf_counter()
    # Closing may itself wait (LeaveGroup behind a held JoinGroup); bound it.
    closer = threading.Thread(target=consumer.close, daemon=True)
    closer.start()
    closer.join(10)
    return {"assigned_s": marks["assigned"] - start if "assigned" in marks else None,
            "first_record_s": marks["record"] - start if "record" in marks else None,
            "cap_s": cap_s, "first_error": first_error, "client_log": client_log.summary()}
