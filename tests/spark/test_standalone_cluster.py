"""The clickstream pipeline on a real Spark standalone cluster: a master and two one-core workers
(odradek.spark.standalone, real JVMs on loopback), the driver `odradek pipeline clickstream --master
spark://...` as a process of its own, executors that import odradek and read and write Kafka themselves.

* the pipeline on both workers against one broker: Parquet and the output topic (read_committed) hold
  every closed window exactly once, with the counts computed in plain Python;
* a worker killed with SIGKILL (with its executor) while page views are being produced and a
  processing-time query runs: the query goes on on the other worker, a replacement worker gets an executor,
  and both sinks still hold every window exactly once;
* the same with a three-broker cluster on ZooKeeper (REPLICATED), the broker that leads most input and
  output partitions killed with SIGKILL mid-stream.

The cluster is the module's (its start costs ~10 s; a test that killed a worker leaves a replacement). The
driver is a subprocess because a process has one SparkContext, and the session-scoped local one of
conftest.py may already run in this one (it reads the Parquet output here, as Spark's readers see it:
through the file sink's metadata log, so files of killed task attempts do not count). Every wait has a
deadline and fails at once, with the driver's log, when the driver dies; the producer is bounded in count
and time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from odradek.pipelines import clickstream
from odradek.spark.options import WriteOptions
from odradek.spark.standalone import StandaloneCluster, standalone_unavailable
from tests.cluster.common import REPLICATED
from tests.cluster.common import create_topic as create_replicated_topic
from tests.cluster.conftest import cluster_factory, zookeeper, zookeeper_factory  # noqa: F401 - fixtures of test (c)

from .util import read_all, wait_until

WORKERS = 2
WATERMARK_MS = 30_000
PARTITIONS = 4  # of the pipeline's topics (clickstream.ensure_topics)
MARKER_TOPIC = WriteOptions(client={}).marker_topic  # the exactly-once sink's (the default name)
# Page views of the fault tests: 8 minutes of event time, 200 there before the query starts, the rest
# produced while it runs at a rate that keeps the producer going ~20 s, long enough to kill something mid-way
# (see Producer for the chunks).
FAULT_EVENTS = 680
FAULT_FIRST = 200
FAULT_RATE = 24.0
FAULT_CHUNK = 8


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and two one-core workers for the module; skips (fails under CI) without java or spark-class."""
    reason = standalone_unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the Spark standalone cluster must run in CI: {reason}")
        pytest.skip(reason)
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=WORKERS)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def workers(standalone: StandaloneCluster) -> StandaloneCluster:
    """The module's cluster with its two workers running and ALIVE (a test before may have killed one)."""
    standalone.ensure_workers(WORKERS)
    return standalone


class Driver:
    """`odradek pipeline clickstream ...` in a process (and process group) of its own, output in a log."""

    def __init__(self, args: list[str], log_path: Path, cwd: Path) -> None:
        self.log_path = log_path
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), SPARK_LOCAL_IP="127.0.0.1",
                   PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "odradek", "pipeline", "clickstream", *args],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         cwd=cwd, start_new_session=True)

    def tail(self, n: int = 5000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def assert_running(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the driver exited with {self.proc.returncode}; its log:\n{self.tail()}")

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the driver did not finish within {timeout}s; its log:\n{self.tail()}") from None

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM to the Python driver alone (it stops its queries, then its JVM); its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the Python driver and its JVM
        except ProcessLookupError:
            pass
        self.proc.wait()


@pytest.fixture
def drivers(tmp_path: Path) -> Iterator[Callable[..., Driver]]:
    started: list[Driver] = []

    def start(args: list[str], cwd: Path = tmp_path) -> Driver:
        driver = Driver(args, tmp_path / f"driver-{len(started)}.log", cwd)
        started.append(driver)
        return driver

    yield start
    for driver in started:
        if driver.proc.poll() is None:
            driver.kill()


# JVMs that start fast and compile little (C1 only, serial GC): the micro-batches here are small and the two
# cores are shared by a driver, two executors, their Python workers and the brokers. Two shuffle partitions
# (one per executor) halve the tasks and Kafka transactions of every batch.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SPARK_CONF = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
              "spark.sql.shuffle.partitions": "2", "spark.driver.extraJavaOptions": JVM_OPTIONS,
              "spark.executor.extraJavaOptions": JVM_OPTIONS}


def pipeline_args(bootstrap: str, cluster: StandaloneCluster, output: Path | str, checkpoint: Path | str,
                  *more: str) -> list[str]:
    conf = [arg for key, value in SPARK_CONF.items() for arg in ("--conf", f"{key}={value}")]
    return ["--bootstrap", bootstrap, "--master", cluster.master_url, "--output", str(output),
            "--checkpoint", str(checkpoint), "--rate", "0", "--watermark", "30 seconds", "--exactly-once", "true",
            *conf, *more]


def until(driver: Driver, predicate: Callable[[], Any], timeout: float, message: str, interval: float = 0.5) -> Any:
    """wait_until that fails at once, with the driver's log, when the driver has died."""

    def ready() -> Any:
        return driver.proc.poll() is not None or predicate()

    try:
        value = wait_until(ready, timeout=timeout, interval=interval, message=message)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the driver's log:\n{driver.tail()}") from None
    driver.assert_running()
    return value


def commits(checkpoint: Path, sink: str) -> int:
    """Micro-batches the sink's query has committed (files of its checkpoint's commit log)."""
    folder = checkpoint / sink / "commits"
    return sum(1 for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else 0


def kafka_windows(bootstrap: str) -> list[tuple[int, str, int]]:
    """(window start ms, page, count) of every committed record of the output topic."""
    out = []
    for m in read_all(bootstrap, clickstream.OUTPUT_TOPIC, PARTITIONS, isolation="read_committed"):
        v = json.loads(m.value())
        assert m.key().decode() == v["page"]
        ws = datetime.strptime(v["window_start"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        out.append((int(ws.timestamp() * 1000), v["page"], v["count"]))
    return out


def parquet_windows(spark: Any, output: Path) -> list[tuple[int, str, int]]:
    """(window start ms, page, count) of every row Spark reads from the Parquet sink."""
    rows = spark.read.parquet(str(output)).selectExpr("unix_millis(window_start) AS ws", "page", "count").collect()
    return [(r.ws, r.page, r["count"]) for r in rows]


def assert_exactly_once(rows: list[tuple[int, str, int]], expected: dict[tuple[int, str], int], where: str) -> None:
    keys = [(ws, page) for ws, page, _ in rows]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    assert not dupes, f"{where}: windows emitted more than once: {dupes[:10]}"
    assert {(ws, page): n for ws, page, n in rows} == expected, f"{where}: counts differ from the expected"


def complete(rows_of: Callable[[], list[tuple[int, str, int]]], expected: dict) -> bool:
    return len(rows_of()) >= len(expected)


def fault_events(seed: int) -> tuple[list[dict[str, Any]], dict[tuple[int, str], int]]:
    start = 1_700_000_000_000 - 1_700_000_000_000 % 60_000
    events = clickstream.generate_events(FAULT_EVENTS, start + 777, 8 * 60_000, seed=seed, disorder_ms=10_000)
    return events, clickstream.expected_counts(events, WATERMARK_MS)


class Producer(threading.Thread):
    """Produces page views at a bounded rate in small chunks, each delivered in full before the next starts,
    counting what was delivered (the test's measure of "mid-stream").

    Why chunks: a partition whose leader died takes seconds to accept records again while the others go on.
    Produced freely, its records would arrive after ones event-time minutes younger (event time runs ~17x
    faster than the clock here), and the watermark would rightly drop them as late. Waiting for each chunk
    bounds the disorder any reader can see to one chunk's span of event time (FAULT_CHUNK events, ~6 s), which
    with the generator's disorder stays inside the 30 s watermark."""

    def __init__(self, bootstrap: str, events: list[dict[str, Any]], client: dict[str, Any] | None = None) -> None:
        super().__init__(name="pageviews", daemon=True)
        self.bootstrap, self.events, self.client = bootstrap, events, dict(client or {})
        self.delivered = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        failed: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is None:
                self.delivered += 1
            else:
                failed.append(str(err))

        producer = KafkaProducer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, **self.client})
        began = time.monotonic()
        try:
            for i in range(0, len(self.events), FAULT_CHUNK):
                for n, event in enumerate(self.events[i:i + FAULT_CHUNK], start=i):
                    if self.stop.is_set():
                        return
                    time.sleep(max(0.0, began + n / FAULT_RATE - time.monotonic()))
                    producer.produce(clickstream.INPUT_TOPIC, key=event["user"].encode(),
                                     value=json.dumps(event).encode(), timestamp=event["ts"], on_delivery=on_delivery)
                deadline = time.monotonic() + 60
                while producer.flush(0.5) and not self.stop.is_set():
                    if time.monotonic() >= deadline:
                        raise AssertionError(f"a chunk of page views was not delivered within 60 s at event {i}")
                if failed:
                    raise AssertionError(f"page views not delivered: {failed[:3]}")
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc

    def finish(self, timeout: float = 120.0) -> None:
        self.join(timeout)
        if self.is_alive():
            self.stop.set()
            raise AssertionError(f"the producer did not finish within {timeout}s ({self.delivered} delivered)")
        if self.error is not None:
            raise AssertionError(f"the producer failed: {self.error!r}")
        assert self.delivered == len(self.events)


def run_through_fault(driver: Driver, bootstrap: str, spark: Any, checkpoint: Path, output: Path,
                      producer: Producer, expected: dict, fault: Callable[[], None], after_fault: Callable[[], None],
                      budget: float = 240.0) -> None:
    """With the streaming driver running over the first page views: start producing the rest, and once a
    third of them is in and the Kafka sink has committed a batch since, inject `fault`; check both queries
    commit a batch after it (`after_fault` may then restore capacity), wait for every closed window in both
    sinks, stop the driver (exit code 0: no query failed) and check both sinks exactly once."""
    deadline = time.monotonic() + budget

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    until(driver, lambda: commits(checkpoint, "kafka") >= 1, left(), "the first committed micro-batch")
    before = commits(checkpoint, "kafka")
    producer.start()
    until(driver, lambda: producer.delivered >= len(producer.events) // 3 and commits(checkpoint, "kafka") > before,
          left(), "a third of the page views produced and a batch committed since")
    fault()
    at_fault = {sink: commits(checkpoint, sink) for sink in ("kafka", "parquet")}
    # The page views produced from here on (two thirds) close the last windows: that every window arrives
    # below proves the queries kept going. This only tells a stall after the fault from a slow end.
    until(driver, lambda: all(commits(checkpoint, s) > n for s, n in at_fault.items()), left(),
          "both queries committing a batch after the fault")
    after_fault()
    producer.finish(left())
    until(driver, lambda: complete(lambda: kafka_windows(bootstrap), expected), left(),
          "every closed window in the output topic", interval=2.0)
    until(driver, lambda: complete(lambda: parquet_windows(spark, output), expected), left(),
          "every closed window in Parquet", interval=2.0)
    assert driver.stop() == 0, driver.tail()
    assert_exactly_once(parquet_windows(spark, output), expected, "Parquet")
    assert_exactly_once(kafka_windows(bootstrap), expected, "the output topic")


@pytest.mark.timeout(300)
def test_clickstream_on_standalone_cluster(workers, broker_factory, spark, tmp_path, drivers):
    broker = broker_factory()
    clickstream.ensure_topics(broker.bootstrap)
    start = 1_700_000_000_000 - 1_700_000_000_000 % 60_000
    events = clickstream.generate_events(600, start + 1_234, 6 * 60_000, seed=11, disorder_ms=20_000)
    assert clickstream.produce_events(broker.bootstrap, events) == 600
    expected = clickstream.expected_counts(events, WATERMARK_MS)
    assert len({w for w, _ in expected}) == 5

    # Relative paths, run from tmp_path: the pipeline must hand executors (whose working directory is their
    # worker's) the same absolute paths the driver uses.
    driver = drivers(pipeline_args(broker.bootstrap, workers, "out/parquet", "out/cp", "--available-now",
                                   "--max-offsets-per-trigger", "300"))
    code = driver.wait(240)
    assert code == 0, f"driver exit {code}:\n{driver.tail()}\n{workers.logs(1500)}"
    assert_exactly_once(parquet_windows(spark, tmp_path / "out" / "parquet"), expected, "Parquet")
    assert_exactly_once(kafka_windows(broker.bootstrap), expected, "the output topic")

    # The tasks ran on the cluster: the application had an executor on each worker.
    apps = [a for a in (workers.status() or {}).get("completedapps", []) if a.get("name") == "odradek-clickstream"]
    assert apps, workers.status()
    app_id = max(apps, key=lambda a: a.get("starttime", 0))["id"]
    for w in workers.alive_daemons():
        assert w.work_dir is not None and (w.work_dir / app_id).is_dir(), f"no executor of {app_id} on {w.name}"


@pytest.mark.timeout(420)
def test_worker_killed_mid_stream(workers, broker_factory, spark, tmp_path, drivers):
    broker = broker_factory()
    clickstream.ensure_topics(broker.bootstrap)
    events, expected = fault_events(seed=23)
    assert clickstream.produce_events(broker.bootstrap, events[:FAULT_FIRST]) == FAULT_FIRST
    checkpoint, output = tmp_path / "cp", tmp_path / "parquet"
    driver = drivers(pipeline_args(broker.bootstrap, workers, output, checkpoint, "--trigger-seconds", "1"))
    producer = Producer(broker.bootstrap, events[FAULT_FIRST:])

    def busy() -> list[int]:
        """Indexes of the running workers the master says run an executor (their one core used)."""
        status = workers.status()
        return [i for i, w in enumerate(workers.workers)
                if w.is_running() and (workers.worker_info(w, status) or {}).get("coresused") == 1]

    until(driver, lambda: len(busy()) == WORKERS, 180, "an executor of the pipeline on each worker")
    victim = busy()[0]

    def kill() -> None:
        workers.kill_worker(victim)  # the worker, its executor and their Python workers: a lost machine
        wait_until(lambda: workers.worker_state(workers.workers[victim]) == "DEAD", timeout=60,
                   message="the master to count the killed worker DEAD")

    def replace() -> None:
        replacement = workers.add_worker()
        until(driver, lambda: (workers.worker_info(replacement) or {}).get("coresused") == 1, 90,
              "the replacement worker to run an executor of the pipeline")

    try:
        run_through_fault(driver, broker.bootstrap, spark, checkpoint, output, producer, expected, kill, replace)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{workers.logs(1500)}") from None
    finally:
        producer.stop.set()


@pytest.mark.timeout(420)
def test_broker_leader_killed_mid_stream(workers, cluster_factory, spark, tmp_path, drivers):
    kafka = cluster_factory(3, settings=REPLICATED).start()
    kafka.wait_ready()
    for topic in (clickstream.INPUT_TOPIC, clickstream.OUTPUT_TOPIC):
        create_replicated_topic(kafka, topic, PARTITIONS)
    create_replicated_topic(kafka, MARKER_TOPIC, 1, **{"cleanup.policy": "compact"})
    idempotent = {"enable.idempotence": True}  # a retried produce across the failover must not count twice
    events, expected = fault_events(seed=31)
    assert clickstream.produce_events(kafka.bootstrap, events[:FAULT_FIRST], client=idempotent) == FAULT_FIRST
    checkpoint, output = tmp_path / "cp", tmp_path / "parquet"
    driver = drivers(pipeline_args(kafka.bootstrap, workers, output, checkpoint, "--trigger-seconds", "1"))
    producer = Producer(kafka.bootstrap, events[FAULT_FIRST:], client=idempotent)
    topics = [(t, p) for t in (clickstream.INPUT_TOPIC, clickstream.OUTPUT_TOPIC) for p in range(PARTITIONS)]
    victim: list[int] = []

    def leaders() -> list[int]:
        view = kafka.metadata()
        return [view.partition(t, p).leader for t, p in topics]

    def kill() -> None:
        now = leaders()
        victim.append(max(set(now), key=now.count))
        kafka.kill(victim[0])
        wait_until(lambda: all(leader not in (victim[0], -1) for leader in leaders()), timeout=60,
                   message=f"leaders moved off the killed broker {victim[0]}")

    try:
        run_through_fault(driver, kafka.bootstrap, spark, checkpoint, output, producer, expected, kill, lambda: None)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{kafka.logs(1500)}\n{workers.logs(1500)}") from None
    finally:
        producer.stop.set()
