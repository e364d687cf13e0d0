"""Clickstream pipeline: page-view events -> per-page counts in 1-minute event-time windows.

    odradek pipeline clickstream --bootstrap 127.0.0.1:9092 [--master local[*]] [--rate 50] ...

* A generator produces JSON page views `{"page": "/cart", "user": "u17", "ts": <ms>}` to `pageviews`
  (key = user, record timestamp = event time), slightly out of order as real clicks are. It starts
  BACKFILL_MINUTES back in event time (from a minute's start, or from the topic's latest event when that is
  later: a restart leaves no gap and adds nothing to the minutes already generated), so the first micro-batch
  already closes a complete window rather than the watermark closing the first one two minutes in.
* One streaming computation reads `pageviews` through `format("odradek")` (or, with `--connector kafka`,
  Spark's own `format("kafka")`; see CONNECTORS), parses the events, sets a
  watermark on event time and counts views per page and 1-minute window. Each window is emitted once,
  when the watermark closes it (append mode), to two sinks:
  - the topic `pageviews-per-minute` (key = page, value = JSON with window_start, window_end, page, count),
    written exactly once with Kafka transactions when the broker supports them (`--exactly-once auto`;
    at least once through Spark's own Kafka sink, `--connector kafka`);
  - Parquet files under `--output` (Spark's file sink, exactly once through its own metadata log).
  The sinks are two Spark queries over the same DataFrame, each with its own checkpoint under
  `--checkpoint`, so each restarts from where it stopped.

`--available-now` processes what is in the topic and stops (for batch-like runs and tests); otherwise the
queries run with a processing-time trigger until Ctrl-C or `--duration`.

On a cluster: `--master spark://HOST:PORT` runs the tasks on that Spark standalone cluster (executors of
512m and 1 core, so they fit small workers, unless `--conf spark.executor.memory=...` says otherwise), and
`--standalone-workers N` starts such a cluster of N one-core workers on loopback first (odradek.spark.
standalone), printing its master UI, and stops it at the end. Executors write the Parquet files and the
driver the checkpoints, so `--output` and `--checkpoint` are made absolute: on several machines they must
name a filesystem every one of them sees (HDFS, S3, NFS).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from odradek.spark.job import GracefulStop, ProgressReport, stop_queries, stop_spark
from odradek.tools.common import key_value

log = logging.getLogger("odradek.pipelines.clickstream")

INPUT_TOPIC = "pageviews"
OUTPUT_TOPIC = "pageviews-per-minute"
PAGES = ["/", "/home", "/products", "/product/42", "/cart", "/checkout", "/search", "/about"]
WEIGHTS = [20, 15, 12, 10, 8, 5, 9, 3]
EVENT_SCHEMA = "page STRING, user STRING, ts LONG"
WINDOW_MS = 60_000
# The source and sink format of the Kafka side: odradek's PySpark data source, or Spark's own Kafka connector
# (the spark-sql-kafka-0-10 package: spark_session() puts the copy `make spark-packages` cached on the classpath,
# resolving it first if need be). Both take the same options; only odradek's sink writes exactly once.
CONNECTORS = ("odradek", "kafka")
# How Spark reports a Python worker that did not connect back within its fixed 10 s (a busy machine)
WORKER_START_TIMEOUT = "Python worker failed to connect back"
OUTPUT_FORMATS = ("auto", "live", "lines", "json", "quiet")
# How far back in event time (whole minutes before the current one) the generator starts its stream: with the
# default 1-minute watermark, two minutes make the first micro-batch close one complete window and the next one
# close within the minute.
BACKFILL_MINUTES = 2


# ---------------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------------


def generate_events(count: int, start_ms: int, span_ms: int, seed: int = 7, disorder_ms: int = 10_000,
                    users: int = 50) -> list[dict[str, Any]]:
    """`count` page views spread over [start_ms, start_ms + span_ms), each up to `disorder_ms` early
    (so arrival order is not event-time order), deterministic for a seed."""
    rng = random.Random(seed)
    events = []
    for i in range(count):
        ts = start_ms + (span_ms * i) // max(count, 1) - rng.randrange(0, disorder_ms + 1)
        events.append({"page": rng.choices(PAGES, WEIGHTS)[0], "user": f"u{rng.randrange(users)}",
                       "ts": max(ts, start_ms)})
    return events


def produce_events(bootstrap: str, events: Iterable[dict[str, Any]], topic: str = INPUT_TOPIC,
                   rate: float | None = None, stop: threading.Event | None = None,
                   client: dict[str, Any] | None = None) -> int:
    """Produce events as JSON (at `rate` per second if given); returns how many were delivered."""
    from confluent_kafka import Producer

    delivered = 0
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        elif len(failed) < 5:
            failed.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(client or {})})
    began = time.monotonic()
    for n, event in enumerate(events):
        if stop is not None and stop.is_set():
            break
        if rate:
            wait = began + n / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        while True:
            try:
                producer.produce(topic, key=event["user"].encode(), value=json.dumps(event).encode(),
                                 timestamp=event["ts"], on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    deadline = time.monotonic() + 60
    while producer.flush(1.0) and time.monotonic() < deadline:
        pass
    if failed:
        raise RuntimeError(f"page views not delivered: {failed}")
    return delivered


def live_events(rate: float, seed: int = 7) -> Iterable[dict[str, Any]]:
    """An endless stream of page views stamped with the current time (a little out of order)."""
    rng = random.Random(seed)
    while True:
        now = int(time.time() * 1000)
        yield {"page": rng.choices(PAGES, WEIGHTS)[0], "user": f"u{rng.randrange(50)}",
               "ts": now - rng.randrange(0, 5_000)}


def latest_event_ms(bootstrap: str, topic: str = INPUT_TOPIC, client: dict[str, Any] | None = None,
                    timeout_s: float = 10.0) -> int | None:
    """The latest record timestamp among the last records of `topic`'s partitions (None: none, or no answer
    within `timeout_s`)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-clickstream-generator",
                         "enable.auto.commit": False, "enable.partition.eof": False, **(client or {})})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        last_records = []
        for p in sorted(meta.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if high > low:
                last_records.append(TopicPartition(topic, p, high - 1))
        if not last_records:
            return None
        consumer.assign(last_records)
        unread = {tp.partition for tp in last_records}
        latest: int | None = None
        deadline = time.monotonic() + timeout_s
        while unread and time.monotonic() < deadline:
            for m in consumer.consume(len(unread), 0.5):
                if m.error() is not None:
                    continue
                unread.discard(m.partition())
                _, ts = m.timestamp()
                if ts > 0:
                    latest = ts if latest is None else max(latest, ts)
        return latest
    except KafkaException:
        return None
    finally:
        consumer.close()


def backfill_start_ms(now_ms: int, latest_ms: int | None, minutes: int = BACKFILL_MINUTES) -> int:
    """Where in event time the generator starts: `minutes` before the current minute's start, or just after the
    topic's latest event when that is later."""
    start = now_ms - now_ms % WINDOW_MS - minutes * WINDOW_MS
    return max(start, latest_ms + 1) if latest_ms is not None else start


def generate_stream(bootstrap: str, rate: float, stop: threading.Event, seed: int = 7) -> int:
    """The generator: page views from backfill_start_ms up to now at once (at `rate` per second of event time),
    then live ones at `rate` until `stop`; returns how many were delivered."""
    now = int(time.time() * 1000)
    since = backfill_start_ms(now, latest_event_ms(bootstrap))
    delivered = 0
    if since < now:
        count = int(rate * (now - since) / 1000)
        delivered = produce_events(bootstrap, generate_events(count, since, now - since, seed=seed + 1,
                                                              disorder_ms=5_000), stop=stop)
    return delivered + produce_events(bootstrap, live_events(rate, seed), rate=rate, stop=stop)


def expected_counts(events: Iterable[dict[str, Any]], watermark_ms: int) -> dict[tuple[int, str], int]:
    """Counts per (window start ms, page) for the windows the watermark has closed, computed in plain
    Python: the reference the pipeline is checked against."""
    events = list(events)
    if not events:
        return {}
    closed_before = max(e["ts"] for e in events) - watermark_ms
    out: dict[tuple[int, str], int] = {}
    for e in events:
        start = e["ts"] - e["ts"] % WINDOW_MS
        if start + WINDOW_MS <= closed_before:
            out[(start, e["page"])] = out.get((start, e["page"]), 0) + 1
    return out


# ---------------------------------------------------------------------------------------------------
# Spark
# ---------------------------------------------------------------------------------------------------


def kafka_connector_conf() -> dict[str, str]:
    """Session settings for Spark's own Kafka connector: its cached jars (resolved now if not yet); raises
    RuntimeError with the reason where it cannot be had."""
    from odradek.spark.packages import KAFKA

    status = KAFKA.resolve(quiet=True)
    if not status.installed:
        raise RuntimeError(f"--connector kafka needs Spark's Kafka connector: {status.reason}; "
                           f"`make spark-packages` retries, or start Spark with spark.jars.packages={KAFKA.coordinate()}")
    if status.note:
        log.warning("%s", status.note)
    return KAFKA.spark_conf(status)


def spark_session(master: str = "local[*]", app_name: str = "odradek-clickstream", extra: dict[str, str] | None = None,
                  connector: str = "odradek") -> Any:
    from odradek.spark.session import spark_session as session

    return session(master, app_name, {**(kafka_connector_conf() if connector == "kafka" else {}), **(extra or {})})


def page_counts(spark: Any, bootstrap: str, topic: str = INPUT_TOPIC, watermark: str = "1 minute",
                max_offsets_per_trigger: int | None = None, starting_offsets: str = "earliest",
                connector: str = "odradek") -> Any:
    """The streaming DataFrame of (window_start, window_end, page, count), read through `connector`."""
    from pyspark.sql import functions as F

    reader = (spark.readStream.format(connector).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", starting_offsets))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    events = (reader.load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*")
              .where(F.col("page").isNotNull() & F.col("ts").isNotNull())
              .withColumn("event_time", F.timestamp_millis(F.col("ts"))))
    return (events.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", "1 minute"), F.col("page"))
            .count()
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "page", "count"))


def start_sinks(counts: Any, bootstrap: str, output: str, checkpoint: str, output_topic: str = OUTPUT_TOPIC,
                exactly_once: str = "auto", trigger: dict[str, Any] | None = None,
                connector: str = "odradek") -> list[Any]:
    """Start the Kafka and Parquet sinks; returns the two StreamingQuery objects. With connector "kafka"
    the topic is written by Spark's own Kafka sink, at least once (`exactly_once` must not be "true")."""
    if connector == "kafka" and exactly_once == "true":
        raise ValueError("Spark's own Kafka sink writes at least once: exactly once needs --connector odradek")
    from pyspark.sql import functions as F

    trigger = trigger or {"processingTime": "10 seconds"}
    as_record = counts.select(
        F.col("page").alias("key"),
        F.to_json(F.struct(
            F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "page", "count")).alias("value"))
    writer = (as_record.writeStream.format(connector).outputMode("append").queryName("clickstream-kafka")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", output_topic)
              .option("checkpointLocation", str(Path(checkpoint) / "kafka")))
    if connector == "odradek":
        writer = writer.option("exactlyOnce", exactly_once)
    to_kafka = writer.trigger(**trigger).start()
    to_parquet = (counts.writeStream.format("parquet").outputMode("append").queryName("clickstream-parquet")
                  .option("path", output).option("checkpointLocation", str(Path(checkpoint) / "parquet"))
                  .trigger(**trigger).start())
    return [to_kafka, to_parquet]


def ensure_topics(bootstrap: str, partitions: int = 4) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    wanted = [NewTopic(t, partitions, -1) for t in (INPUT_TOPIC, OUTPUT_TOPIC) if t not in existing]
    if not wanted:
        return
    for topic, fut in admin.create_topics(wanted, request_timeout=30).items():
        try:
            fut.result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


# ---------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="odradek pipeline clickstream", description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap servers (default %(default)s)")
    p.add_argument("--master", default="local[*]", help="Spark master (default %(default)s)")
    p.add_argument("--output", default="clickstream-output/pageviews-per-minute", help="Parquet output directory")
    p.add_argument("--checkpoint", default="clickstream-output/checkpoints", help="checkpoint directory")
    p.add_argument("--rate", type=float, default=50.0, help="generated page views per second (0: no generator)")
    p.add_argument("--events", type=int, default=None,
                   help="produce this many events over --span-minutes of past event time, then stop generating")
    p.add_argument("--span-minutes", type=int, default=10)
    p.add_argument("--watermark", default="1 minute", help="allowed event-time lateness (default %(default)s)")
    p.add_argument("--trigger-seconds", type=float, default=10.0)
    p.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--connector", choices=CONNECTORS, default="odradek",
                   help='Kafka source and sink: format("odradek") or Spark\'s own format("kafka") (the '
                        'spark-sql-kafka-0-10 package, resolved from Maven Central on first use; its sink is at '
                        'least once) (default %(default)s)')
    p.add_argument("--exactly-once", choices=["auto", "true", "false"], default="auto",
                   help="Kafka sink delivery: transactions (true), at least once (false), or probe (auto); "
                        "--connector odradek only")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--conf", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="a Spark setting for the session (repeatable), e.g. spark.executor.memory=1g")
    p.add_argument("--standalone-workers", type=int, default=None, metavar="N",
                   help="start a Spark standalone cluster of N one-core workers on loopback and run on it "
                        "(instead of --master); it stops with the pipeline")
    p.add_argument("--standalone-dir", default="clickstream-output/spark-standalone",
                   help="logs and work directories of --standalone-workers (default %(default)s)")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--format", choices=OUTPUT_FORMATS, default="auto",
                   help="what is printed while it runs: a live view refreshed per trigger (live), a line per "
                        "micro-batch and per new window (lines), JSON lines (json) or only the summary (quiet); "
                        "auto: live on a terminal, lines otherwise (default %(default)s)")
    p.add_argument("--quiet", action="store_const", const="quiet", dest="format", help="same as --format quiet")
    p.add_argument("--json", action="store_const", const="json", dest="format", help="same as --format json")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.connector == "kafka" and args.exactly_once == "true":
        parser.error("--exactly-once true needs --connector odradek: Spark's own Kafka sink writes at least once")
    conf = dict(args.conf)
    if args.standalone_workers is not None:
        if args.master != parser.get_default("master"):
            parser.error("--standalone-workers starts its own cluster: leave out --master")
        if args.standalone_workers < 1:
            parser.error("--standalone-workers needs at least 1")
    # Executors resolve a relative path against their own working directory (a worker's work dir), the
    # driver against its own: only an absolute path names the same place for both.
    args.output = os.path.abspath(args.output)
    args.checkpoint = os.path.abspath(args.checkpoint)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # "Closing down clientserver connection" at the end
    if args.connector == "kafka":
        try:
            kafka_connector_conf()  # before any event is produced: the reason if the package cannot be had
        except RuntimeError as exc:
            log.error("%s", exc)
            return 2
    ensure_topics(args.bootstrap)
    # Ctrl-C and SIGTERM end the run gracefully (queries stopped between micro-batches, Spark and a cluster of
    # --standalone-workers stopped, status 0); a second one forces
    graceful = GracefulStop()
    graceful.install()
    stop = graceful.event
    generator: threading.Thread | None = None
    if args.events:
        now = int(time.time() * 1000)
        span = args.span_minutes * WINDOW_MS
        n = produce_events(args.bootstrap, generate_events(args.events, now - span, span))
        log.info("produced %d page views to %s", n, INPUT_TOPIC)
    elif args.rate > 0 and not args.available_now:
        generator = threading.Thread(target=generate_stream, name="pageview-generator", daemon=True,
                                     args=(args.bootstrap, args.rate, stop))
        generator.start()
        log.info("generating %.0f page views/s to %s", args.rate, INPUT_TOPIC)

    cluster = None
    if args.standalone_workers is not None:
        from odradek.spark.standalone import StandaloneCluster, StandaloneClusterError

        cluster = StandaloneCluster(Path(args.standalone_dir), workers=args.standalone_workers)
        try:
            cluster.start()  # stops what it started if it fails or is interrupted
        except StandaloneClusterError as exc:
            log.error("%s", exc)
            stop.set()
            return 2
        except KeyboardInterrupt:
            stop.set()
            return 130
        # the driver binds where the cluster does, so executors on loopback can reach it
        os.environ.setdefault("SPARK_LOCAL_IP", cluster.host)
        args.master = cluster.master_url
        conf = {**cluster.app_conf(), **conf}
        print(f"Spark master UI: {cluster.ui_url}  (master {cluster.master_url}, {args.standalone_workers} "
              f"worker(s), logs in {cluster.base_dir / 'logs'})", flush=True)
    try:
        return _run(args, conf, graceful)
    finally:
        stop.set()
        if cluster is not None:
            cluster.stop()


def _run(args: argparse.Namespace, conf: dict[str, str], graceful: GracefulStop) -> int:
    """The streaming queries on a session of `args.master`, until they end, Ctrl-C, SIGTERM or --duration."""
    stop = graceful.event
    style = args.format if args.format != "auto" else "live" if sys.stdout.isatty() else "lines"
    trigger_ms = None if args.available_now else int(args.trigger_seconds * 1000)
    report = ProgressReport("clickstream", style, trigger_ms=trigger_ms, one_input=True)
    if stop.is_set():  # stopped while the cluster started
        print(report.summary("stopped"), flush=True)
        return 0
    try:
        spark = spark_session(args.master, connector=args.connector, extra=conf)
    except RuntimeError as exc:
        log.error("%s", exc)
        return 2
    graceful.install()  # again: SparkContext put PySpark's own SIGINT handler (cancel every job) in its place
    if spark.sparkContext.uiWebUrl and style != "json":
        print(f"Spark application UI: {spark.sparkContext.uiWebUrl}", file=sys.stderr, flush=True)
    failed = False
    queries: list[Any] = []
    screen = ResultScreen(style, args.bootstrap, trigger_ms)
    try:
        if not stop.is_set():
            counts = page_counts(spark, args.bootstrap, watermark=args.watermark,
                                 max_offsets_per_trigger=args.max_offsets_per_trigger, connector=args.connector)
            trigger = ({"availableNow": True} if args.available_now
                       else {"processingTime": f"{args.trigger_seconds} seconds"})
            queries = start_sinks(counts, args.bootstrap, args.output, args.checkpoint,
                                  exactly_once=args.exactly_once, trigger=trigger, connector=args.connector)
            log.info("clickstream running: %s -> %s and %s (Ctrl-C to stop)", INPUT_TOPIC, OUTPUT_TOPIC, args.output)
        deadline = time.monotonic() + args.duration if args.duration else None
        restarts_left = 5
        while not stop.is_set() and (any(q.isActive for q in queries) or queries and restarts_left and any(
                WORKER_START_TIMEOUT in str(q.exception()) for q in queries)):
            if deadline is not None and time.monotonic() >= deadline:
                break
            failures = [q.exception() for q in queries if not q.isActive and q.exception() is not None]
            if failures and restarts_left and all(WORKER_START_TIMEOUT in str(f) for f in failures):
                # Spark gives the Python worker planning a source 10 s to start (not configurable); on a busy
                # machine that can pass with nothing processed, and starting again from the checkpoints is safe
                restarts_left -= 1
                log.info("a Python worker of Spark's started too slowly; starting the queries again")
                stop_queries(queries)
                queries = start_sinks(counts, args.bootstrap, args.output, args.checkpoint,
                                      exactly_once=args.exactly_once, trigger=trigger, connector=args.connector)
                continue
            if failures:
                break  # one sink failed: the other would go on alone and the two would drift apart
            report.poll(queries)
            screen.show(report)
            stop.wait(0.5)
    finally:
        stop.set()
        stop_queries(queries)
        report.poll(queries)
        screen.close(report)
        for q in queries:
            if q.exception() is not None:
                failed = True
                log.error("query %s failed: %s", q.name, q.exception())
        stop_spark(spark)
    how = "failed" if failed else "finished" if args.available_now and not graceful.signals else "stopped"
    print(report.summary(how), flush=True)
    return 1 if failed else 0


class ResultScreen:
    """What the user sees of the results while the queries run, per output style: the live view (a terminal),
    a line per new complete window (lines), a JSON object per window (json) or nothing (quiet). The windows
    are read back from OUTPUT_TOPIC by a WindowFeed, so what is shown is what was committed."""

    def __init__(self, style: str, bootstrap: str, trigger_ms: int | None) -> None:
        from odradek.pipelines.live_view import WindowFeed

        self.style, self.trigger_ms = style, trigger_ms
        self.began = time.monotonic()
        self.feed = WindowFeed(bootstrap, OUTPUT_TOPIC, INPUT_TOPIC).start() if style != "quiet" else None
        self.live: Any = None
        self.handlers: list[tuple[logging.StreamHandler, Any]] = []

    def _state(self, report: ProgressReport) -> Any:
        from odradek.pipelines.live_view import ViewState, consumed_offsets, lag_behind

        windows, high = self.feed.snapshot() if self.feed is not None else ({}, {})
        lags = [lag_behind(high, consumed_offsets(p)) for p in report.latest.values()]
        last = report.last or {}
        batches, read, written = report.totals()  # both queries read the same events: counted once
        return ViewState(windows=windows, batches=batches, read_total=read, written_total=written,
                         last_read=last.get("read"), last_written=last.get("written"),
                         duration_ms=last.get("duration_ms"), trigger_ms=self.trigger_ms,
                         lag=max((lag for lag in lags if lag is not None), default=None),
                         elapsed_s=time.monotonic() - self.began)

    def show(self, report: ProgressReport) -> None:
        if self.feed is None:
            return
        if self.style == "live":
            from odradek.pipelines.live_view import render_view

            if self.live is None:
                self._start_live()
            self.live.update(render_view(self._state(report)), refresh=True)
            return
        from odradek.pipelines.live_view import window_line

        for window, pages in self.feed.new_windows():
            if self.style == "json":
                print(json.dumps({"event": "window", "job": "clickstream", "window_start": window[0],
                                  "window_end": window[1], "views": pages}), flush=True)
            else:
                print(window_line(window, pages), flush=True)

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.live = Live(console=Console(), auto_refresh=False, redirect_stdout=True, redirect_stderr=True)
        self.live.start()
        # log lines go above the view (rich's stderr proxy) rather than through it
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.__stderr__, sys.__stdout__):
                self.handlers.append((handler, handler.setStream(sys.stderr)))

    def close(self, report: ProgressReport) -> None:
        if self.feed is not None:
            self.feed.catch_up()  # the windows of the last micro-batch too
        if self.live is not None:
            self.show(report)  # the last frame stays on screen
            self.live.stop()
            for handler, stream in self.handlers:
                handler.setStream(stream)
        elif self.feed is not None:
            self.show(report)
        if self.feed is not None:
            self.feed.stop()


if __name__ == "__main__":
    sys.exit(main())
