"""Exactly-once streaming writes: a query killed mid-run (SIGKILL of its driver) and restarted from its
checkpoint, and a batch replayed after its Kafka transactions committed, leave every record in the output
exactly once (verified with a read_committed consumer)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from odradek.spark.options import parse_write_options
from odradek.spark.writer import probe_transactions

from .util import create_topic, produce, read_all, stream_run, wait_until

JOB = Path(__file__).with_name("eo_job.py")
N = 300


@pytest.fixture
def transactions(broker):
    """The exactly-once writer needs broker transactions; odradek has them, so their absence is a failure."""
    why = probe_transactions(parse_write_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": "x"},
                                                 streaming=True), timeout_s=15)
    assert why is None, f"broker transactions unavailable: {why}"


def _job(broker, src, dst, checkpoint, mode, log):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen([sys.executable, str(JOB), broker.bootstrap, src, dst, str(checkpoint), mode],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _committed_values(broker, dst):
    return Counter(m.value() for m in read_all(broker.bootstrap, dst, 2, isolation="read_committed"))


def test_killed_query_restarts_without_duplicates(transactions, broker, spark, tmp_path):
    src, dst = "eo-src", "eo-dst"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    produce(broker.bootstrap, src, [{"value": b"%d" % i, "key": b"%d" % i, "partition": i % 2} for i in range(N)])
    checkpoint = tmp_path / "cp"
    with open(tmp_path / "job1.log", "w") as log:
        job = _job(broker, src, dst, checkpoint, "processing", log)
        try:
            wait_until(lambda: sum(_committed_values(broker, dst).values()) >= 60, timeout=120,
                       message="some committed output before the kill")
        finally:
            os.killpg(job.pid, signal.SIGKILL)  # the Python driver and its JVM, mid-batch
            job.wait()
    partial = _committed_values(broker, dst)
    assert max(partial.values()) == 1 and sum(partial.values()) < N
    with open(tmp_path / "job2.log", "w") as log:
        job = _job(broker, src, dst, checkpoint, "availableNow", log)
        assert job.wait(timeout=240) == 0, (tmp_path / "job2.log").read_text()[-3000:]
    values = _committed_values(broker, dst)
    assert values == Counter(b"%d" % i for i in range(N))

    # A batch replayed after its transactions committed (the driver died before writing its commit log):
    # drop the last commit entry; the restarted query recomputes that batch and its tasks write nothing.
    produce(broker.bootstrap, src, [{"value": b"%d" % i, "key": b"%d" % i, "partition": i % 2} for i in range(N, N + 20)])
    with open(tmp_path / "job3.log", "w") as log:
        assert _job(broker, src, dst, checkpoint, "availableNow", log).wait(timeout=240) == 0
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    crc = checkpoint / "commits" / f".{last.name}.crc"
    if crc.exists():
        crc.unlink()
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", src).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "30").load())
    q = (df.selectExpr("key", "value").writeStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", dst).option("exactlyOnce", "true").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    stream_run(q, timeout=120)
    assert _committed_values(broker, dst) == Counter(b"%d" % i for i in range(N + 20))
    shutil.rmtree(checkpoint, ignore_errors=True)
