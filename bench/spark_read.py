"""Spark throughput of format("odradek") next to Spark's own format("kafka") and a plain confluent-kafka
consumer, on the same topic and broker.

    .venv/bin/python bench/spark_read.py [--records 1000000] [--size 100] [--partitions 4] [--rounds 3]
                                         [--write-records 200000] [--bootstrap H:P]

Without --bootstrap a broker is started (python -m odradek serve, temporary data dir) and stopped at the end.
The topic is filled once with --records records of --size bytes; then
* plain consumer: one confluent-kafka Consumer assign()s every partition from the beginning and reads until
  it has every record (the client-side ceiling for one Python process);
* spark read: spark.read.format(F) ... .write.format("noop") on local[N] for F = "odradek" (Arrow batches
  from Python workers, one task per partition) and F = "kafka" (Spark's own connector, JVM only, one task
  per partition), timed from the action's start (plan + read);
* spark write (unless --write-records 0): spark.range(W) as key = the id, value = --size bytes, written
  by df.write.format(F) into a fresh topic of --partitions partitions per run, each connector with its
  default producer settings (batch writes are at least once in both); every run is checked by the topic's
  end offsets before it counts.
Both connectors share one SparkSession (Spark's package from the cache of odradek.spark.packages,
`make spark-packages`; without it the format("kafka") rows say why). Each connector runs once untimed first
(JVM JIT, Python workers); then --rounds rounds run each connector once, the order alternating round by
round, and the table shows the median. Bounded: every phase has a timeout. Prints markdown tables of rows/s
and MB/s (value bytes, 1 MB = 10^6 B).
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "serve", "--listen", bootstrap, "--data-dir", str(data)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("broker exited")
        if line.startswith("odradek: accepting connections on "):
            return proc, bootstrap
    raise RuntimeError("broker did not start")


def fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "enable.idempotence": False, "acks": 1})
    payload = b"x" * size
    deadline = time.monotonic() + 600
    for i in range(records):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
                if time.monotonic() > deadline:
                    raise TimeoutError("filling the topic took too long")
        if i % 10000 == 0:
            p.poll(0)
    while p.flush(1.0):
        if time.monotonic() > deadline:
            raise TimeoutError("flush took too long")


def plain_consumer(bootstrap: str, topic: str, partitions: int, records: int, timeout: float) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-read", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10, "queued.min.messages": 1_000_000,
                  "max.partition.fetch.bytes": 16 << 20, "fetch.max.bytes": 64 << 20})
    for p in range(partitions):
        c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
    got = 0
    began = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    deadline = time.monotonic() + timeout
    while got < records and time.monotonic() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - began
    c.close()
    if got < records:
        raise TimeoutError(f"plain consumer read {got} of {records}")
    return elapsed


def spark_read(spark, fmt: str, bootstrap: str, topic: str, records: int) -> float:
    df = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .load())
    began = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - began
    return elapsed


def topic_size(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-check"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                   for p in range(partitions))
    finally:
        c.close()


def spark_write(spark, fmt: str, bootstrap: str, partitions: int, records: int, size: int, run: str) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-spark-write-{fmt}-{run}-{int(time.time() * 1000)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    df = spark.range(0, records, 1, partitions).selectExpr("CAST(id AS STRING) AS key",
                                                           f"CAST(repeat('x', {size}) AS BINARY) AS value")
    began = time.perf_counter()
    df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode("append").save()
    elapsed = time.perf_counter() - began
    written = topic_size(bootstrap, topic, partitions)
    if written != records:
        raise RuntimeError(f'format("{fmt}") wrote {written} of {records} records to {topic}')
    return elapsed


def rounds(candidates: dict[str, Callable[[str], float]], n: int) -> dict[str, list[float]]:
    """One untimed run of each, then n rounds of each once, the order alternating: {name: [seconds]}."""
    names = list(candidates)
    for name in names:
        candidates[name]("warm-up")
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(n):
        for name in (names if r % 2 == 0 else names[::-1]):
            times[name].append(candidates[name](f"r{r}"))
    return times


def table(title: str, rows: list[tuple[str, Any]], records: int, size: int) -> None:
    mb = records * size / 1e6
    print(f"\n| {title} | runs | median s | rows/s | MB/s |")
    print("|---|---:|---:|---:|---:|")
    for name, secs in rows:
        if isinstance(secs, str):
            print(f"| {name} | - | n/a | n/a | {secs} |")
            continue
        med = statistics.median(secs)
        print(f"| {name} | {len(secs)} | {med:.2f} | {records / med:,.0f} | {mb / med:.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per connector (median shown)")
    ap.add_argument("--write-records", type=int, default=200_000, help="records per write run (0: no write part)")
    ap.add_argument("--master", default=None, help="Spark master (default local[nproc])")
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--timeout", type=float, default=300.0, help="per phase, seconds")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    proc = None
    tmp = tempfile.TemporaryDirectory()
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            proc, bootstrap = start_broker(Path(tmp.name) / "data")
        topic = f"bench-spark-read-{int(time.time())}"
        t = time.perf_counter()
        fill(bootstrap, topic, args.partitions, args.records, args.size)
        print(f"filled {args.records} x {args.size} B into {args.partitions} partitions in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
        plain = [plain_consumer(bootstrap, topic, args.partitions, args.records, args.timeout)
                 for _ in range(args.rounds)]

        import pyspark
        from pyspark.sql import SparkSession

        from odradek.spark import register
        from odradek.spark.packages import KAFKA

        package = KAFKA.resolve(quiet=True)
        master = args.master or f"local[{os.cpu_count() or 2}]"
        spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .config(map=KAFKA.spark_conf(package))
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        formats = ["odradek", "kafka"] if package.installed else ["odradek"]

        def bounded(what: str, run: Callable[[], float]) -> float:
            """run() with its Spark jobs cancelled after --timeout seconds."""
            sc = spark.sparkContext
            sc.setJobGroup(what, what, interruptOnCancel=True)
            timer = threading.Timer(args.timeout, sc.cancelJobGroup, (what,))
            timer.start()
            try:
                return run()
            except Exception as exc:
                if not timer.is_alive():
                    raise TimeoutError(f"{what}: longer than {args.timeout} s") from exc
                raise
            finally:
                timer.cancel()

        reads = rounds({f: (lambda run, f=f: bounded(f"read {f} {run}", lambda: spark_read(
            spark, f, bootstrap, topic, args.records))) for f in formats}, args.rounds)
        writes: dict[str, list[float]] = {}
        if args.write_records:
            writes = rounds({f: (lambda run, f=f: bounded(f"write {f} {run}", lambda: spark_write(
                spark, f, bootstrap, args.partitions, args.write_records, args.size, run))) for f in formats},
                args.rounds)
        spark.stop()

        print(f"\n{platform.node()} · nproc {os.cpu_count()} · Python {platform.python_version()} · "
              f"Spark {pyspark.__version__} {master} · {args.partitions} partitions, values of {args.size} B · "
              f"median of {args.rounds} rounds, order alternating")
        missing = f"not run: {package.reason}"
        kafka_name = f'Spark format("kafka") ({package.coordinate.rsplit(":", 1)[-1]})' if package.installed \
            else 'Spark format("kafka")'
        if package.note:
            print(f"\nformat(\"kafka\"): {package.note}")
        table(f"read {args.records} records", [("plain confluent-kafka Consumer", plain),
                                                ('Spark format("odradek") -> noop', reads["odradek"]),
                                                (kafka_name + " -> noop", reads.get("kafka", missing))],
              args.records, args.size)
        if args.write_records:
            table(f"batch write {args.write_records} records", [('Spark format("odradek")', writes["odradek"]),
                                                                (kafka_name, writes.get("kafka", missing))],
                  args.write_records, args.size)
        return 0
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
