"""Spark throughput of format("odradek") next to Spark's own format("kafka") and a plain confluent-kafka
consumer, on the same topic and broker: per executor core, and on a Spark standalone cluster of one and of
two workers.

    .venv/bin/python bench/spark_read.py [--parts local,cluster,delta] [--records 1000000] [--size 100]
                                         [--partitions 4] [--rounds 3] [--write-records 200000]
                                         [--local-cores 1,NPROC] [--workers 1,2] [--formats odradek,kafka]
                                         [--bootstrap H:P] [--timeout 300]

Without --bootstrap a broker is started (bench/workloads.py's OwnBroker: odradek serve on a free loopback
port, temporary data dir) and stopped at the end. The topic is filled once with --records records of --size
bytes; then
* plain consumer: one confluent-kafka Consumer assign()s every partition from the beginning and reads until
  it has every record (the client-side ceiling for one Python process, i.e. one core), --rounds times;
* part `local` (the default): one Spark application per `local[K]` of --local-cores (default 1 and the
  machine's core count), each in a subprocess of its own (a SparkSession's master is fixed for its process);
* part `cluster`: a Spark standalone master (odradek.spark.standalone) and 1 one-core worker, one application
  on `spark://...`; then a second worker joins and a new application runs on both (--workers);
* part `delta`: the lag of `odradek tables sync` (append mode) behind a producer of --delta-rate records/s
  (`delta_sync_lag`).
In every application:
* spark read: spark.read.format(F) ... .write.format("noop") for F = "odradek" (Arrow batches from Python
  workers, one task per partition) and F = "kafka" (Spark's own connector, JVM only, one task per partition),
  timed from the action's start (plan + read);
* spark write (unless --write-records 0): spark.range(W) as key = the id, value = --size bytes, written
  by df.write.format(F) into a fresh topic of --partitions partitions per run, each connector with its
  default producer settings (batch writes are at least once in both); every run is checked by the topic's
  end offsets before it counts.
Both connectors share one SparkSession per application (Spark's package from the cache of
odradek.spark.packages, `make spark-packages`; without it the format("kafka") rows say why). Each connector
runs once untimed first (JVM JIT, Python workers, executors); then --rounds rounds run each connector once,
the order alternating round by round, and the tables show the median. Around every timed run the broker's
CPU (/proc/PID/stat) and the whole machine's busy CPU (/proc/stat) are read, so a reader can tell a
saturated machine from a slow connector. Bounded: every Spark action is cancelled after --timeout, every
application's subprocess is killed after its share of timeouts, the plain consumer stops at --timeout.
Prints markdown tables of rows/s and MB/s (value bytes, 1 MB = 10^6 B) and writes them to
bench/results/spark.md, the figures to bench/results/spark.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import native
from compaction import busy_cpu_s
from workloads import OwnBroker, cpu_seconds, create_topic, machine

PARTS = ("local", "cluster", "delta")
DEFAULT_PARTS = ("local",)
FORMATS = ("odradek", "kafka")
SPARK_START_S = 180.0  # a driver JVM, and on a cluster its executors, on a busy 2-core machine
EXECUTORS_TIMEOUT_S = 90.0  # for every worker's executor to register before the warm-up
CHILD_MARKER = "spark-bench-result: "
TARGET_PER_CORE = 0.80  # issue 20: the connector's read rate per core >= 80 % of the plain consumer's
TARGET_SCALING = 1.6  # issue 20: two workers >= 1.6x one worker


def log(msg: str) -> None:
    print(f"[spark-bench] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# Data and the plain consumer (the parent process)


def fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions)
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


def metered(broker_pid: int | None, run: Callable[[], float]) -> dict:
    """run() (returning its timed seconds) with the broker's CPU seconds and the machine's busy CPU seconds
    over the same call: {"s", "broker_cpu_s" (None without a broker pid), "busy_cpu_s", "wall_s"}."""
    broker0 = cpu_seconds(broker_pid) if broker_pid else None
    busy0, t0 = busy_cpu_s(), time.perf_counter()
    seconds = run()
    wall, busy1 = time.perf_counter() - t0, busy_cpu_s()
    broker1 = cpu_seconds(broker_pid) if broker_pid else None
    return {"s": seconds, "wall_s": wall, "busy_cpu_s": busy1 - busy0,
            "broker_cpu_s": None if broker0 is None or broker1 is None else broker1 - broker0}


# --------------------------------------------------------------------------------------------------
# One Spark application (a subprocess: `spark_read.py --child SPEC`)


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


def spark_write(spark, fmt: str, bootstrap: str, partitions: int, records: int, size: int, run: str,
                timed: Callable[[Callable[[], float]], dict]) -> dict:
    topic = f"bench-spark-write-{fmt}-{run}-{int(time.time() * 1000)}"
    create_topic(bootstrap, topic, partitions)
    df = spark.range(0, records, 1, partitions).selectExpr("CAST(id AS STRING) AS key",
                                                           f"CAST(repeat('x', {size}) AS BINARY) AS value")

    def action() -> float:
        began = time.perf_counter()
        df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode("append").save()
        return time.perf_counter() - began

    result = timed(action)
    written = topic_size(bootstrap, topic, partitions)
    if written != records:
        raise RuntimeError(f'format("{fmt}") wrote {written} of {records} records to {topic}')
    return result


def rounds(what: str, candidates: dict[str, Callable[[str], dict]], n: int) -> dict[str, list[dict]]:
    """One untimed run of each, then n rounds of each once, the order alternating: {name: [metered run]}."""
    names = list(candidates)
    for name in names:
        candidates[name]("warm-up")
    times: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(n):
        for name in (names if r % 2 == 0 else names[::-1]):
            times[name].append(candidates[name](f"r{r}"))
            log(f"  {what} {name} r{r}: {times[name][-1]['s']:.2f} s")
    return times


def wait_executors(spark, want: int, timeout: float) -> None:
    """Until `want` executors (the driver not counted) have registered with the application."""
    deadline = time.monotonic() + timeout
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
    while status().size() - 1 < want:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{status().size() - 1} of {want} executors registered within {timeout:.0f} s")
        time.sleep(0.5)


def child(spec: dict) -> dict:
    """One Spark application on spec["master"]: the reads and writes of spec["formats"]; its figures."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import pyspark
    from pyspark.sql import SparkSession

    from odradek.spark import register
    from odradek.spark.packages import KAFKA

    package = KAFKA.resolve(quiet=True)
    t0 = time.perf_counter()
    spark = (SparkSession.builder.master(spec["master"]).appName(f"odradek-bench-spark {spec['name']}")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config(map=KAFKA.spark_conf(package)).config(map=spec["conf"])
             .getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        if spec["executors"]:
            wait_executors(spark, spec["executors"], EXECUTORS_TIMEOUT_S)
        started_s = time.perf_counter() - t0
        formats = [f for f in spec["formats"] if f != "kafka" or package.installed]
        timeout, broker_pid = spec["timeout"], spec["broker_pid"]

        def bounded(what: str, run: Callable[[], float]) -> dict:
            """run() metered, its Spark jobs cancelled after `timeout` seconds."""
            sc = spark.sparkContext
            sc.setJobGroup(what, what, interruptOnCancel=True)
            timer = threading.Timer(timeout, sc.cancelJobGroup, (what,))
            timer.start()
            try:
                return metered(broker_pid, run)
            except Exception as exc:
                if not timer.is_alive():
                    raise TimeoutError(f"{what}: longer than {timeout} s") from exc
                raise
            finally:
                timer.cancel()

        b, n = spec["bootstrap"], spec["rounds"]
        reads = rounds("read", {f: (lambda run, f=f: bounded(f"read {f} {run}", lambda: spark_read(
            spark, f, b, spec["topic"], spec["records"]))) for f in formats}, n)
        writes: dict[str, list[dict]] = {}
        if spec["write_records"]:
            writes = rounds("write", {f: (lambda run, f=f: spark_write(
                spark, f, b, spec["partitions"], spec["write_records"], spec["size"], run,
                lambda action, what=f"write {f} {run}": bounded(what, action))) for f in formats}, n)
        return {"spark": pyspark.__version__, "app_id": spark.sparkContext.applicationId, "started_s": started_s,
                "reads": reads, "writes": writes,
                "kafka_package": {"installed": package.installed, "reason": package.reason, "note": package.note,
                                  "version": package.coordinate.rsplit(":", 1)[-1] if package.installed else None}}
    finally:
        spark.stop()


def child_main(spec_json: str) -> int:
    result = child(json.loads(spec_json))
    print(CHILD_MARKER + json.dumps(result), flush=True)
    return 0


def child_cap(args: argparse.Namespace) -> float:
    """How long one application may take in all: its start, and every action (warm-ups included) at its
    --timeout, with a minute per action for topic creation and the end-offset check."""
    actions = (args.rounds + 1) * len(args.formats) * (2 if args.write_records else 1)
    return SPARK_START_S + EXECUTORS_TIMEOUT_S + actions * (args.timeout + 60)


def run_application(args: argparse.Namespace, ctx: dict, name: str, kind: str, master: str, cores: int,
                    conf: dict[str, str] | None = None, executors: int = 0,
                    env: dict[str, str] | None = None) -> dict:
    """`child()` in a subprocess (own process group, killed with its JVM at child_cap()); its figures, or
    {"error"} if it failed."""
    spec = {"name": name, "master": master, "conf": conf or {}, "executors": executors,
            "formats": list(args.formats), "bootstrap": ctx["bootstrap"], "topic": ctx["topic"],
            "records": args.records, "size": args.size, "partitions": args.partitions, "rounds": args.rounds,
            "write_records": args.write_records, "timeout": args.timeout, "broker_pid": ctx["broker_pid"]}
    config = {"name": name, "kind": kind, "master": master, "cores": cores}
    log(f"{name}: a Spark application on {master}")
    cap = child_cap(args)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                                stdout=out, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                start_new_session=True)
        try:
            code = proc.wait(cap)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if proc.poll() is None or code is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM
                except ProcessLookupError:
                    pass
                proc.wait()
        out.seek(0)
        text = out.read()
    config["wall_s"] = time.perf_counter() - t0
    lines = [ln for ln in text.splitlines() if ln.startswith(CHILD_MARKER)]
    if code is None:
        config["error"] = f"killed after {cap:.0f} s"
    elif code != 0 or not lines:
        tail = " / ".join(text.strip().splitlines()[-3:])[-300:]
        config["error"] = f"exit {code}" + (f": {tail}" if tail else "")
    else:
        config.update(json.loads(lines[-1][len(CHILD_MARKER):]))
    if config.get("error"):
        log(f"{name}: {config['error']}")
    return config


# --------------------------------------------------------------------------------------------------
# The parts


def run_local(args: argparse.Namespace, ctx: dict) -> list[dict]:
    return [run_application(args, ctx, f"local[{k}]", "local", f"local[{k}]", k) for k in args.local_cores]


def run_cluster(args: argparse.Namespace, ctx: dict) -> list[dict]:
    """A master and one-core workers: an application on 1 worker, then (workers added) on 2, ... ."""
    from odradek.spark.standalone import StandaloneCluster, StandaloneClusterError

    configs = []
    base = Path(ctx["tmp"]) / "spark-standalone"
    cluster = StandaloneCluster(base, workers=args.workers[0], cores=1)
    try:
        t0 = time.perf_counter()
        cluster.start()
        ctx["cluster_start_s"] = time.perf_counter() - t0
        for n in args.workers:
            cluster.ensure_workers(n)
            conf = {**cluster.app_conf(), "spark.cores.max": str(n)}
            configs.append(run_application(args, ctx, f"standalone, {n} worker{'s' if n > 1 else ''}", "cluster",
                                           cluster.master_url, n, conf, executors=n,
                                           env={"SPARK_LOCAL_IP": cluster.host}))
            app = configs[-1].get("app_id")  # an executor ran on a worker that has a work dir of the app
            configs[-1]["workers_used"] = sum(1 for w in cluster.alive_daemons()
                                              if app and w.work_dir is not None and (w.work_dir / app).is_dir())
    except StandaloneClusterError as exc:
        configs.append({"name": "standalone", "kind": "cluster", "master": "spark://", "cores": 0,
                        "error": f"the cluster did not start: {str(exc)[:300]}"})
    finally:
        cluster.stop()
    return configs


def delta_commits(table: Path) -> list[tuple[float, int]]:
    """(commit time s, rows written) of every commit of a Delta table so far, in version order."""
    out = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        try:
            lines = commit.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if info is not None:
                out.append((info["timestamp"] / 1000, int(info.get("operationMetrics", {}).get("numOutputRows", 0))))
    return out


def delta_sync_lag(args: argparse.Namespace, ctx: dict) -> dict:
    """`odradek tables sync` (append mode, --trigger-seconds) on a one-partition topic while a producer
    writes --delta-rate records/s of --size B for --delta-seconds. A record's lag is the commit time (in the
    table's log) of the commit that holds it minus the time it was handed to the producer; with one partition
    the table's rows arrive in offset order, so the commit of record k is the first whose running row count
    reaches k."""
    from confluent_kafka import Producer

    topic, table = f"bench-delta-{int(time.time())}", Path(ctx["tmp"]) / "delta-table"
    create_topic(ctx["bootstrap"], topic, 1)
    producer = Producer({"bootstrap.servers": ctx["bootstrap"], "linger.ms": 5})
    producer.produce(topic, b"warm-up")  # the sync's first commit: the JVM is up and the query running
    producer.flush(30)
    cmd = [sys.executable, "-m", "odradek", "tables", "sync", "--bootstrap", ctx["bootstrap"], "--topic", topic,
           "--path", str(table), "--trigger-seconds", str(args.delta_trigger), "--master", "local[1]",
           "--conf", "spark.ui.enabled=false", "--log-level", "WARNING"]
    log(f"delta: odradek tables sync, then {args.delta_rate:,} records/s for {args.delta_seconds:.0f} s")
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        try:
            deadline = time.monotonic() + SPARK_START_S
            while sum(n for _, n in delta_commits(table)) < 1:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out.seek(0)
                    return {"measured": False, "note": f"the sync did not start: {out.read()[-400:]}"}
                time.sleep(0.2)
            total = int(args.delta_rate * args.delta_seconds)
            sent: list[float] = []
            payload = b"x" * args.size
            began = time.time()
            for i in range(total):
                wait = began + i / args.delta_rate - time.time()
                if wait > 0:
                    time.sleep(wait)
                while True:
                    try:
                        producer.produce(topic, payload)
                        break
                    except BufferError:
                        producer.poll(0.01)
                sent.append(time.time())
                if i % 1000 == 0:
                    producer.poll(0)
            producer.flush(60)
            produced_s = time.time() - began
            deadline = time.monotonic() + args.timeout
            while sum(n for _, n in delta_commits(table)) < total + 1 and time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                time.sleep(0.2)
            commits = delta_commits(table)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    lags, landed, k = [], -1, 0  # the warm-up record is row 0
    for at, n in commits:
        landed += n
        while k < total and k < landed:
            lags.append(at - sent[k])
            k += 1
    if not lags:
        return {"measured": False, "note": "no produced record reached the table"}
    lags.sort()
    pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]  # noqa: E731
    return {"measured": True, "records": total, "landed": len(lags), "rate": args.delta_rate,
            "achieved_rate": total / produced_s, "trigger_s": args.delta_trigger, "commits": len(commits),
            "p50_s": pick(0.50), "p95_s": pick(0.95), "p99_s": pick(0.99), "max_s": lags[-1]}


# --------------------------------------------------------------------------------------------------
# The report


def med(runs: list[dict], key: str = "s") -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def med_cores(runs: list[dict], key: str) -> float | None:
    """Median over the runs of `key` CPU seconds per second of the run's wall time (cores kept busy)."""
    values = [r[key] / r["wall_s"] for r in runs if r.get(key) is not None and r.get("wall_s")]
    return statistics.median(values) if values else None


def cell(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


def rate(runs: list[dict], records: int) -> float | None:
    m = med(runs)
    return records / m if m else None


def connector_name(fmt: str, part: dict) -> str:
    if fmt == "kafka" and part.get("kafka_version"):
        return f'format("kafka") ({part["kafka_version"]})'
    return f'format("{fmt}")'


def op_rows(part: dict, op: str, records: int) -> list[str]:
    """The rows of the read (op "reads") or write ("writes") table: every application, every format."""
    plain = rate(part["plain"], part["records"]) if op == "reads" else None
    size = part["size"]
    rows = []
    if plain is not None:
        rows.append(f"| plain confluent-kafka Consumer | 1 process | 1 | {len(part['plain'])} | "
                    f"{cell(med(part['plain']), '{:.2f}')} | {plain:,.0f} | {plain * size / 1e6:.1f} | 1.00 | "
                    f"{cell(med_cores(part['plain'], 'broker_cpu_s'), '{:.2f}')} | "
                    f"{cell(med_cores(part['plain'], 'busy_cpu_s'), '{:.2f}')} |")
    for config in part["configs"]:
        for fmt in part["formats"]:
            head = f"| {connector_name(fmt, part)} | {config['name']} | {config['cores']} |"
            runs = (config.get(op) or {}).get(fmt)
            if runs is None:
                why = config.get("error") or (part.get("kafka_missing") if fmt == "kafka" else None) or "not run"
                rows.append(f"{head} - | n/a | {why} | n/a |{' n/a |' if op == 'reads' else ''} n/a | n/a |")
                continue
            r = rate(runs, records)
            per_core = f"{r / config['cores'] / plain:.2f}" if r and plain else "n/a"
            rows.append(f"{head} {len(runs)} | {cell(med(runs), '{:.2f}')} | {cell(r, '{:,.0f}')} | "
                        f"{cell(r and r * size / 1e6, '{:.1f}')} |{f' {per_core} |' if op == 'reads' else ''} "
                        f"{cell(med_cores(runs, 'broker_cpu_s'), '{:.2f}')} | "
                        f"{cell(med_cores(runs, 'busy_cpu_s'), '{:.2f}')} |")
    return rows


def scaling(part: dict) -> dict[str, dict[str, float | None]]:
    """{op: {format: rows/s on the most workers / rows/s on one worker}} over the cluster applications."""
    clusters = sorted((c for c in part["configs"] if c["kind"] == "cluster" and not c.get("error")),
                      key=lambda c: c["cores"])
    out: dict[str, dict[str, float | None]] = {}
    if len(clusters) < 2 or clusters[0]["cores"] != 1:
        return out
    one, most = clusters[0], clusters[-1]
    for op, records in (("reads", part["records"]), ("writes", part["write_records"])):
        for fmt in part["formats"]:
            a = rate((one.get(op) or {}).get(fmt) or [], records)
            b = rate((most.get(op) or {}).get(fmt) or [], records)
            out.setdefault(op, {})[fmt] = b / a if a and b else None
    return out


def targets(part: dict, ratios: dict) -> list[str]:
    """Issue 20's targets for format("odradek"), each with its figure from this run and whether it is met."""
    plain = rate(part["plain"], part["records"])
    rows = []
    for config in part["configs"]:
        r = rate((config.get("reads") or {}).get("odradek") or [], part["records"])
        if r and plain:
            value = r / config["cores"] / plain
            rows.append((f"read per core ÷ plain consumer, {config['name']} ({config['cores']} core"
                         f"{'s' if config['cores'] > 1 else ''})", f"≥ {TARGET_PER_CORE:.2f}", f"{value:.2f}",
                         value >= TARGET_PER_CORE))
    most = max((c["cores"] for c in part["configs"] if c["kind"] == "cluster" and not c.get("error")), default=0)
    for op in ("reads", "writes"):
        value = ratios.get(op, {}).get("odradek")
        if value is not None:
            rows.append((f"{op[:-1]}, standalone {most} workers ÷ 1 worker", f"≥ {TARGET_SCALING:.1f}×",
                         f"{value:.2f}×", value >= TARGET_SCALING))
    if not rows:
        return []
    return ["", '## Targets (issue 20), format("odradek")', "", "| figure | target | this run | met |",
            "|---|---:|---:|---|", *(f"| {a} | {b} | {c} | {'yes' if ok else 'no'} |" for a, b, c, ok in rows)]


def render_delta(delta: dict) -> list[str]:
    lines = ["", "## Delta sync lag (odradek tables sync, append mode)", ""]
    if not delta.get("measured"):
        return lines + [delta.get("note", ""), ""]
    return lines + [
        f"{delta['records']:,} records produced at {delta['achieved_rate']:,.0f}/s (asked {delta['rate']:,}/s) to "
        f"one partition; micro-batch trigger {delta['trigger_s']:g} s, local[1]; lag = commit time of the "
        "record's row in the table's log − the time the record was handed to the producer.", "",
        "| landed | commits | p50 s | p95 s | p99 s | max s |", "|---:|---:|---:|---:|---:|---:|",
        f"| {delta['landed']:,} of {delta['records']:,} | {delta['commits']} | {delta['p50_s']:.2f} | "
        f"{delta['p95_s']:.2f} | {delta['p99_s']:.2f} | {delta['max_s']:.2f} |", ""]


def render(part: dict) -> str:
    facts = [part["date"], part["host"], f"nproc {part['nproc']}",
             f"load average (1 min) at the start {part['loadavg_1m']}", f"Python {part['python']}",
             f"Spark {part.get('spark') or '?'}", f"confluent-kafka {part['confluent_kafka']} / librdkafka "
             f"{part['librdkafka']}", f"parts {', '.join(part['parts'])}", f"{part['partitions']} partitions, "
             f"values of {part['size']} B", f"median of {part['rounds']} rounds, order alternating",
             f"wall time {part['wall_s'] / 60:.1f} min"]
    n = part["nproc"]
    lines = ["# Spark connector throughput (bench/spark_read.py)", "", " · ".join(facts), "",
             f"The broker, the driver, the executors (and on a cluster the master and workers) share these {n} "
             "cores. \"broker CPU\" and \"machine busy\" are cores kept busy over each timed run (CPU seconds / "
             "wall seconds) by the broker process and by the whole machine (/proc/stat); a machine busy close to "
             f"{n} means the figures are bound by the machine, not the connector."]
    if part.get("kafka_note"):
        lines += ["", f'format("kafka"): {part["kafka_note"]}']
    cpu = "broker CPU, cores | machine busy, cores |"
    if part["configs"] or part["plain"]:
        lines += ["", f"## Read {part['records']:,} records", "",
                  "\"per core ÷ plain\" = (rows/s ÷ executor cores) ÷ the plain consumer's rows/s (one Python "
                  f"process, one core); target (issue 20) ≥ {TARGET_PER_CORE:.2f} for format(\"odradek\").", "",
                  f"| reader | where | cores | runs | median s | rows/s | MB/s | per core ÷ plain | {cpu}",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|", *op_rows(part, "reads", part["records"])]
    if part["configs"] and part["write_records"]:
        lines += ["", f"## Batch write {part['write_records']:,} records", "",
                  f"| writer | where | cores | runs | median s | rows/s | MB/s | {cpu}",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|", *op_rows(part, "writes", part["write_records"])]
    ratios = scaling(part)
    if ratios:
        most = max(c["cores"] for c in part["configs"] if c["kind"] == "cluster" and not c.get("error"))
        lines += ["", f"## Standalone cluster: {most} workers ÷ 1 worker (one core each)", "",
                  f"target (issue 20) ≥ {TARGET_SCALING:.1f}× for format(\"odradek\")", "",
                  "| connector | read | write |", "|---|---:|---:|"]
        for fmt in part["formats"]:
            lines.append(f"| {connector_name(fmt, part)} | {cell(ratios.get('reads', {}).get(fmt), '{:.2f}×')} | "
                         f"{cell(ratios.get('writes', {}).get(fmt), '{:.2f}×')} |")
    if part.get("cluster_start_s") is not None:
        used = "; ".join(f"{c['workers_used']} in the application on {c['name']}" for c in part["configs"]
                         if "workers_used" in c)
        lines += ["", f"Standalone master and first worker up in {part['cluster_start_s']:.1f} s; each application "
                      "waits for every worker's executor before its warm-up."
                  + (f" Workers that ran an executor of the application: {used}." if used else "")]
    lines += targets(part, ratios)
    if part.get("delta") is not None:
        lines += render_delta(part["delta"])
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Main


def csv_of(kind: Callable[[str], Any], choices: tuple | None = None) -> Callable[[str], list]:
    def parse(text: str) -> list:
        values = [kind(v.strip()) for v in text.split(",") if v.strip()]
        bad = [v for v in values if choices is not None and v not in choices]
        if not values or bad:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list{f' of {choices}' if choices else ''}")
        return list(dict.fromkeys(values))
    return parse


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return child_main(sys.argv[2])
    nproc = os.cpu_count() or 2
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", type=csv_of(str, PARTS), default=list(DEFAULT_PARTS),
                    help=f"comma-separated, of {', '.join(PARTS)} (default {','.join(DEFAULT_PARTS)})")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per connector (median shown)")
    ap.add_argument("--write-records", type=int, default=200_000, help="records per write run (0: no write part)")
    ap.add_argument("--local-cores", type=csv_of(int), default=sorted({1, nproc}),
                    help=f"part local: one application per local[K] (default 1,{nproc})")
    ap.add_argument("--workers", type=csv_of(int), default=[1, 2],
                    help="part cluster: one application per worker count, one core each (default 1,2)")
    ap.add_argument("--formats", type=csv_of(str, FORMATS), default=list(FORMATS))
    ap.add_argument("--bootstrap", default=None, help="a running broker (its CPU is then not read)")
    ap.add_argument("--timeout", type=float, default=300.0, help="per phase, seconds")
    ap.add_argument("--delta-rate", type=int, default=10_000, help="part delta: records/s produced")
    ap.add_argument("--delta-seconds", type=float, default=60.0, help="part delta: how long to produce")
    ap.add_argument("--delta-trigger", type=float, default=1.0, help="part delta: the sync's trigger, seconds")
    args = ap.parse_args()
    if args.records < 1 or args.rounds < 1 or args.write_records < 0 or min(args.local_cores + args.workers) < 1:
        ap.error("--records, --rounds, --local-cores and --workers must be at least 1, --write-records at least 0")
    args.workers = sorted(args.workers)
    broker = None
    tmp = tempfile.TemporaryDirectory(prefix="odradek-bench-spark-")
    t_start = time.perf_counter()
    from odradek.spark.packages import KAFKA

    package = KAFKA.resolve(quiet=True)
    part: dict[str, Any] = {
        **machine(), "host": platform.node(), "parts": args.parts, "records": args.records, "size": args.size,
        "partitions": args.partitions, "rounds": args.rounds, "write_records": args.write_records,
        "formats": args.formats, "plain": [], "configs": [], "kafka_note": package.note,
        "kafka_version": package.coordinate.rsplit(":", 1)[-1] if package.installed else None,
        "kafka_missing": None if package.installed else f"not run: {package.reason}"}
    try:
        if args.bootstrap:
            bootstrap, broker_pid = args.bootstrap, None
        else:
            broker = OwnBroker()
            bootstrap, broker_pid = broker.address, broker.proc.pid
        topic = f"bench-spark-read-{int(time.time())}"
        ctx = {"bootstrap": bootstrap, "broker_pid": broker_pid, "topic": topic, "tmp": tmp.name}
        spark_parts = [p for p in args.parts if p in ("local", "cluster")]
        if spark_parts:
            t = time.perf_counter()
            fill(bootstrap, topic, args.partitions, args.records, args.size)
            log(f"filled {args.records} x {args.size} B into {args.partitions} partitions in "
                f"{time.perf_counter() - t:.1f} s")
            for _ in range(args.rounds):
                part["plain"].append(metered(broker_pid, lambda: plain_consumer(
                    bootstrap, topic, args.partitions, args.records, args.timeout)))
                log(f"plain consumer: {part['plain'][-1]['s']:.2f} s")
        if "local" in args.parts:
            part["configs"] += run_local(args, ctx)
        if "cluster" in args.parts:
            part["configs"] += run_cluster(args, ctx)
            part["cluster_start_s"] = ctx.get("cluster_start_s")
        if "delta" in args.parts:
            part["delta"] = delta_sync_lag(args, ctx)
        part["spark"] = next((c["spark"] for c in part["configs"] if c.get("spark")), None)
        part["wall_s"] = time.perf_counter() - t_start
        return native.publish("spark", part, render)
    finally:
        if broker is not None:
            broker.stop()
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
