"""Client-side workloads shared by the benchmark scripts (confluent-kafka / librdkafka).

Every function takes a bootstrap address and works against any Kafka-compatible broker; every wait is
bounded. Imported by bench/throughput.py (single broker), bench/compare.py (side by side with peers) and
the other bench scripts (`from throughput import OwnBroker, create_topic, make_payload` keeps working:
throughput.py re-exports these names).
"""

from __future__ import annotations

import argparse
import datetime
import json
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
from typing import Callable

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY_MARKER = "odradek: accepting connections on"
READY_TIMEOUT_S = 30.0


class OwnBroker:
    """A broker subprocess on 127.0.0.1 (port chosen by the OS) with a throwaway data directory;
    `properties` are given to it as `--set NAME=VALUE`."""

    def __init__(self, properties: dict[str, str] | None = None) -> None:
        self.tmp = tempfile.mkdtemp(prefix="odradek-bench-")
        self.stderr = open(os.path.join(self.tmp, "broker.log"), "w+b")
        self.ready = threading.Event()
        self.address: str | None = None
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "serve", "--listen", "127.0.0.1:0",
             "--data-dir", os.path.join(self.tmp, "data"), "--log-level", "WARNING",
             *(arg for name, value in (properties or {}).items() for arg in ("--set", f"{name}={value}"))],
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


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                 replication: int = 1, assignment: list[list[int]] | None = None) -> None:
    """Create topic `name`; `config` holds topic-level settings (e.g. segment.bytes). `assignment` (the
    broker ids of each partition's replicas, preferred leader first) replaces `partitions` and `replication`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if assignment is not None:
        topic = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=config or {})
    else:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication, config=config or {})
    for future in admin.create_topics([topic], operation_timeout=10).values():
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


class CpuMeter:
    """CPU seconds used from now on by a broker process (with ``broker_pid``; a tuple of pids: their sum, e.g. a
    cluster's brokers) and by this process, the client (its Python loop and librdkafka's threads): where the
    cores went during a timed workload."""

    def __init__(self, broker_pid: int | tuple[int, ...] | None) -> None:
        self.broker_pid = broker_pid
        self.broker0 = cpu_seconds(broker_pid) if broker_pid else None
        self.client0 = time.process_time()

    def used(self) -> dict:
        """{"client_cpu_s", and "broker_cpu_s" when the broker's could be read}."""
        out = {"client_cpu_s": time.process_time() - self.client0}
        broker1 = cpu_seconds(self.broker_pid) if self.broker_pid else None
        if self.broker0 is not None and broker1 is not None:
            out["broker_cpu_s"] = broker1 - self.broker0
        return out


def write_results(out_dir: str, stem: str, report: str, figures: dict) -> None:
    """Print `report` and keep it as `out_dir`/`stem`.md, with `figures` as `stem`.json (bench/results/)."""
    print(report)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{stem}.md"), "w") as fh:
        fh.write(report)
    with open(os.path.join(out_dir, f"{stem}.json"), "w") as fh:
        json.dump(figures, fh, indent=2, default=str)
    print(f"wrote {os.path.join(out_dir, stem + '.md')} and {stem}.json", file=sys.stderr)


def cpu_seconds(pid: int | tuple[int, ...]) -> float | None:
    """User + system CPU time used so far by `pid` (its threads included), from /proc/PID/stat; for a tuple
    of pids their sum (None if one cannot be read)."""
    if isinstance(pid, tuple):
        each = [cpu_seconds(p) for p in pid]
        return None if None in each else sum(each)
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def produce(bootstrap: str, topic: str, size: int, count: int, cap_s: float, acks: str,
            config: dict | None = None, per_txn: int | None = None, broker_pid: int | None = None,
            start_gate: Callable[[], None] | None = None) -> dict:
    """Produce `count` records of `size` random bytes (no key, default partitioner) as fast as possible.

    The producer connects and loads metadata before the clock starts; time runs from the first produce()
    to the end of flush(); only records whose delivery report succeeded count. `config` adds to (or
    overrides) the producer settings, e.g. enable.idempotence or max.in.flight.requests.per.connection.

    With `per_txn` the producer is transactional (`config` must set transactional.id): it inits transactions
    before the clock starts, produces in transactions of `per_txn` records (begin, produce, commit), checks
    the time cap only between transactions and lets a started transaction commit up to 30 s past it; only
    records that were delivered and committed count, and the result also holds the number of transactions.

    `start_gate` is called once the producer is connected, just before the clock starts (ClientPool
    passes a barrier's wait, so that its clients start together). The result holds the clock's `start`
    and `end` (time.perf_counter(), the system-wide monotonic clock).
    """
    client_log = ClientLog()
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1_000_000,
        "compression.type": "none", "enable.idempotence": False,
        "queue.buffering.max.messages": 500_000, "message.timeout.ms": int(cap_s * 1000) + 30_000,
        "logger": client_log.logger, **(config or {})})
    payload = make_payload(size)
    state = {"delivered": 0, "failed": 0, "first_error": None}

    def on_delivery(err, _msg) -> None:
        if err is None:
            state["delivered"] += 1
        else:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or str(err)

    if per_txn is not None:
        producer.init_transactions(30)
    producer.list_topics(topic, timeout=10)  # connect and load metadata before the clock starts
    if start_gate is not None:
        start_gate()
    grace_s = 0.0 if per_txn is None else 30.0
    cpu = CpuMeter(broker_pid)
    start = time.perf_counter()
    deadline = start + cap_s
    sent = committed = transactions = 0
    in_txn = False
    while sent < count and (in_txn or time.perf_counter() < deadline):
        if per_txn is not None and not in_txn:
            producer.begin_transaction()
            in_txn = True
        try:
            producer.produce(topic, payload, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.001)  # local queue full: wait for deliveries to drain it
            continue
        producer.poll(0)
        if in_txn and (sent % per_txn == 0 or sent == count):
            producer.commit_transaction(max(5.0, deadline - time.perf_counter() + grace_s))
            in_txn = False
            committed = sent
            transactions += 1
    producer.flush(max(0.0, deadline - time.perf_counter() + grace_s))
    end = time.perf_counter()
    cpu_used = cpu.used()
    records = state["delivered"] if per_txn is None else min(committed, state["delivered"])
    result = {"records": records, "seconds": end - start, "start": start, "end": end, "capped": records < count,
              "failed": state["failed"], "first_error": state["first_error"], "client_log": client_log.summary(),
              **cpu_used}
    if per_txn is not None:
        result["transactions"] = transactions
    if len(producer):  # cap reached with records still in flight: drop them, they are not counted
        producer.purge()
        producer.flush(5)
    return result


def consume(bootstrap: str, topic: str, size: int, count: int, cap_s: float, partitions: int = 1,
            broker_pid: int | None = None, start_gate: Callable[[], None] | None = None,
            config: dict | None = None) -> dict:
    """Read `count` records from offset 0 of every partition by assign(), checking each payload.
    `start_gate`, `start`, `end` and `config` as for produce()."""
    client_log = ClientLog()
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "fetch.min.bytes": 1, "fetch.wait.max.ms": 10,
        "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "receive.message.max.bytes": 100 * 1024 * 1024,
        # librdkafka's own prefetch depth (64 MiB, 100k records), without its 1 s pause each time that fills.
        # A deeper queue let a consumer buffer most of the topic: twice the page faults per record, and
        # the faster the broker, the sooner the whole topic was buffered (bench/README.md).
        "fetch.queue.backoff.ms": 10,
        "logger": client_log.logger, **(config or {})})
    # Connect to the leader and look up the first offsets before the clock starts (otherwise
    # librdkafka's offset query races the connection and retries after ~0.5 s).
    lows = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0] for p in range(partitions)]
    if start_gate is not None:
        start_gate()
    cpu = CpuMeter(broker_pid)
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
    end = time.perf_counter()
    cpu_used = cpu.used()
    consumer.close()
    if corrupt:
        first_error = first_error or f"{corrupt} records read back with a different payload"
    return {"records": got, "seconds": end - start, "start": start, "end": end, "capped": got < count,
            "failed": errors, "first_error": first_error, "client_log": client_log.summary(), **cpu_used}


def rates(result: dict, size: int) -> dict:
    secs = result["seconds"]
    result["msgs_per_s"] = result["records"] / secs if secs > 0 else 0.0
    result["mb_per_s"] = result["records"] * size / secs / 1e6 if secs > 0 else 0.0
    return result


# --------------------------------------------------------------------------------------------------
# Several clients at once

POOL_SETUP_TIMEOUT_S = 60.0  # for every client of a job to connect and reach the start barrier
POOL_RESULT_GRACE_S = 60.0  # past the workload's own time cap, for its result to come back


def _pool_worker(jobs, results, barrier) -> None:
    """A ClientPool process: runs produce()/consume() jobs until it gets None. A failure is reported as
    {"error": text}; one before the start barrier breaks the barrier, so nobody waits on this client."""
    work = {"produce": produce, "consume": consume}

    def gate() -> None:
        barrier.wait(POOL_SETUP_TIMEOUT_S)

    while (job := jobs.get()) is not None:
        kind, kwargs = job
        try:
            results.put(work[kind](**kwargs, start_gate=gate))
        except Exception as exc:  # the parent turns it into an n/a cell
            barrier.abort()
            results.put({"error": f"{type(exc).__name__}: {exc}".replace("\n", " ")})


class ClientPool:
    """`clients` client processes, spawned once and reused for every workload, that run one workload
    together: each connects and loads metadata, then all start their clocks at one barrier. One Python
    client keeps a core busy with its own loop; more than one lets a workload load the broker rather
    than measure the client.

    run() adds the clients' results up: records summed, seconds from the first clock start to the last
    clock stop, client CPU summed over the clients, broker CPU read from here between the barrier and
    the last result."""

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self._ctx = multiprocessing.get_context("spawn")
        self._spawn()

    def _spawn(self) -> None:
        self._barrier = self._ctx.Barrier(self.clients + 1)  # + this process, to read the broker's CPU
        self._results = self._ctx.Queue()
        self._jobs = [self._ctx.Queue() for _ in range(self.clients)]
        self._procs = [self._ctx.Process(target=_pool_worker, args=(jobs, self._results, self._barrier),
                                         daemon=True) for jobs in self._jobs]
        for proc in self._procs:
            proc.start()

    def run(self, kind: str, cap_s: float, broker_pid: int | tuple[int, ...] | None = None, **kwargs) -> dict:
        """Every client runs produce() or consume() (`kind`) with `cap_s` and `kwargs`; raises
        RuntimeError if any client failed."""
        for jobs in self._jobs:
            jobs.put((kind, dict(kwargs, cap_s=cap_s)))
        cpu = None
        try:
            self._barrier.wait(POOL_SETUP_TIMEOUT_S)
            cpu = CpuMeter(broker_pid)
        except threading.BrokenBarrierError:
            pass  # a client failed before the start (or never got there); its result says why
        try:
            parts = [self._results.get(timeout=POOL_SETUP_TIMEOUT_S + cap_s + POOL_RESULT_GRACE_S)
                     for _ in self._procs]
        except queue.Empty:
            self.close()  # a client is stuck: replace them all so the next workload starts clean
            self._spawn()
            raise RuntimeError(f"a client returned nothing within {cap_s + POOL_RESULT_GRACE_S:.0f} s "
                               "of the workload's start")
        if self._barrier.broken:
            self._barrier.reset()
        # The client that failed first says why; the others only saw the broken barrier.
        errors = sorted((p["error"] for p in parts if "error" in p), key=lambda e: e.startswith("BrokenBarrier"))
        if errors:
            raise RuntimeError(errors[0] + (f" (and {len(errors) - 1} more clients)" if len(errors) > 1 else ""))
        start, end = min(p["start"] for p in parts), max(p["end"] for p in parts)
        out = {"records": sum(p["records"] for p in parts), "seconds": end - start,
               "capped": any(p["capped"] for p in parts), "failed": sum(p["failed"] for p in parts),
               "first_error": next((p["first_error"] for p in parts if p["first_error"]), None),
               "client_log": next((p["client_log"] for p in parts if p["client_log"]), None),
               "client_cpu_s": sum(p["client_cpu_s"] for p in parts), "clients": self.clients}
        if cpu is not None:
            out["broker_cpu_s"] = cpu.used().get("broker_cpu_s")
            if out["broker_cpu_s"] is None:
                del out["broker_cpu_s"]
        return out

    def close(self) -> None:
        for jobs in self._jobs:
            jobs.put(None)
        for proc in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()


# --------------------------------------------------------------------------------------------------
# Producer variants side by side (bench/idempotence.py, bench/transactions.py)


def compare_producer_variants(doc: str, title: str, mode_column: str, name_prefix: str, topic_prefix: str,
                              variants: list[tuple[str, dict, int | None]], records: int, size: int = 1024,
                              cap_s: float = 15.0, quick_factor: int = 5) -> int:
    """main() of a script that compares producer settings: parses [--quick] [--rounds N] [--bootstrap
    HOST:PORT], starts its own broker unless given one, and per round produces `records` records of `size`
    bytes (acks=all) with each variant into a fresh single-partition topic, alternating the order between
    rounds; then prints a markdown table, the rates over all rounds and the failures (exit status 1 if any).

    A variant is (label, producer config, records per transaction or None); a transactional one gets a
    transactional.id of its own. --quick divides `records` and `cap_s` by `quick_factor`.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bootstrap", metavar="HOST:PORT")
    args = parser.parse_args()
    count = records // quick_factor if args.quick else records
    cap_s = cap_s / quick_factor if args.quick else cap_s
    txn_column = any(per_txn is not None for _, _, per_txn in variants)
    broker = None if args.bootstrap else OwnBroker()
    bootstrap = args.bootstrap or broker.address
    rows = []
    try:
        run_id = uuid.uuid4().hex[:8]
        for r in range(max(1, min(args.rounds, 10))):
            order = variants if r % 2 == 0 else variants[::-1]
            for v, (label, config, per_txn) in enumerate(order):
                topic = f"{topic_prefix}-{run_id}-{r}-{v}"
                create_topic(bootstrap, topic)
                if per_txn is not None:
                    config = {**config, "transactional.id": f"bench-{run_id}-{topic}"}
                row = rates(produce(bootstrap, topic, size, count, cap_s, "all", config, per_txn), size)
                row.update(label=label, target=count)
                rows.append(row)
                print(f"  round {r} {name_prefix}{label}: {row['records']:,} records in {row['seconds']:.2f} s",
                      file=sys.stderr)
    finally:
        if broker is not None:
            broker.stop()
    print(f"# odradek produce {size_label(size)} acks=all, {title}{' (--quick)' if args.quick else ''}\n")
    if txn_column:
        print(f"| {mode_column} | records | transactions | seconds | msgs/s | MB/s |\n|---|---:|---:|---:|---:|---:|")
    else:
        print(f"| {mode_column} | records | seconds | msgs/s | MB/s |\n|---|---:|---:|---:|---:|")
    for row in rows:
        capped = f" of {row['target']:,} (time cap)" if row["records"] < row["target"] else ""
        txns = f" {row.get('transactions', 0):,} |" if txn_column else ""
        print(f"| {row['label']} | {row['records']:,}{capped} |{txns} {row['seconds']:.2f} "
              f"| {row['msgs_per_s']:,.0f} | {row['mb_per_s']:.2f} |")
    print()
    for label, _, _ in variants:
        mine = [r for r in rows if r["label"] == label]
        total = sum(r["records"] for r in mine)
        secs = sum(r["seconds"] for r in mine)
        if secs:
            print(f"{name_prefix}{label}: {total / secs:,.0f} msgs/s, {total * size / secs / 1e6:.1f} MB/s (all rounds)")
    failed = [r for r in rows if r["failed"]]
    for r in failed:
        print(f"\n! {name_prefix}{r['label']}: {r['failed']} failed, first: {r['first_error']}")
    return 1 if failed else 0


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


def latency(bootstrap: str, topic: str, rate: int, seconds: float, warmup_s: float, size: int = 100,
            config: dict | None = None) -> dict:
    """One producer (linger.ms=0, acks=all; `config` adds to or overrides its settings) sends `rate` records/s
    for `seconds`, each stamped with its send time; a consumer in another process (assign(),
    fetch.wait.max.ms=100) records receive - send. The first `warmup_s` of records are not counted. Latency
    figures are in milliseconds."""
    total = int(rate * seconds)
    skip = int(rate * warmup_s)
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_latency_consumer, daemon=True,
                        args=(bootstrap, topic, total, skip, seconds + 20.0, ready, results))
    child.start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "message.timeout.ms": 15_000, **(config or {})})
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
