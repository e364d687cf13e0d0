"""Spark read throughput through format("odradek") next to a plain confluent-kafka consumer, same topic.

    .venv/bin/python bench/spark_read.py [--records 1000000] [--size 100] [--partitions 4] [--bootstrap H:P]

Without --bootstrap a broker is started (python -m odradek serve, temporary data dir) and stopped at the end.
The topic is filled once with --records records of --size bytes; then
* plain consumer: one confluent-kafka Consumer assign()s every partition from the beginning and reads until
  it has every record (the client-side ceiling for one Python process);
* spark: spark.read.format("odradek") ... .write.format("noop") on local[N] (Arrow batches, one task per
  partition), timed from the action's start (plan + read), JVM already warm from one untimed run.
Bounded: every phase has a timeout. Prints a markdown table of rows/s and MB/s (value bytes).
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


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


def spark_read(spark, bootstrap: str, topic: str, records: int) -> float:
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .load())
    began = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - began
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
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
        plain = plain_consumer(bootstrap, topic, args.partitions, args.records, args.timeout)

        from pyspark.sql import SparkSession

        from odradek.spark import register

        master = args.master or f"local[{os.cpu_count() or 2}]"
        spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        spark_read(spark, bootstrap, topic, args.records)  # warm-up: Python workers, JIT
        sp = spark_read(spark, bootstrap, topic, args.records)
        spark.stop()

        mb = args.records * args.size / 1e6
        print(f"\n{platform.node()} · nproc {os.cpu_count()} · Python {platform.python_version()} · "
              f"{args.records} records x {args.size} B, {args.partitions} partitions · Spark {master}\n")
        print("| reader | seconds | rows/s | MB/s |")
        print("|---|---:|---:|---:|")
        for name, secs in (("plain confluent-kafka Consumer", plain), ('Spark format("odradek") -> noop', sp)):
            print(f"| {name} | {secs:.2f} | {args.records / secs:,.0f} | {mb / secs:.1f} |")
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
