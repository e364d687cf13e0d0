"""Log compaction: how fast the log cleaner cleans a dirty log, and what it costs produce latency meanwhile.

    .venv/bin/python bench/compaction.py [--mb 200] [--keys 10000] [--rate 2000] [--seconds 10] [--rounds 3]
    .venv/bin/python bench/compaction.py --quick       # 50 MB, a 6 s idle window, one round

Each round starts one odradek broker (disk log in the temp dir, default settings but
`log.cleaner.backoff.ms=100` and INFO logging, so the cleaner's "cleaning offsets" and "cleaned" lines are
in its log) on a free loopback port, runs 1. and 2. below and stops it; the report shows the median and the
range over the rounds.
Compacted topics of one partition: cleanup.policy=compact, segment.bytes 8 MiB (so segments seal),
min.cleanable.dirty.ratio 0.01. They are created with min.compaction.lag.ms one day, which keeps the cleaner
off them while they are filled; an IncrementalAlterConfigs that sets it to 0 releases them, and the cleaner
picks the log at its next scan (the broker's maintenance tick runs every second).

1. Cleaner throughput: `--mb` of 1 KiB records (random bytes, no compression) over `--keys` keys, round-robin,
   are produced (acks=all, as fast as one confluent-kafka producer goes); then the topic is released and
   nothing else runs. The dirty bytes are the sealed segments' (every one of them is dirty: the log was never
   cleaned); the active segment is never cleaned. Timed from the release until the cleaner checkpoint of the
   partition says the whole cleanable range was cleaned (the swap is done; the replaced segments' files are
   gone). The size before and after is the partition's .log files. The cleaner thread's own time, from the
   "cleaning offsets" line to the last cleaned segment written (its file's mtime), leaves out the up to
   2 s of scheduling by the 1 s tick at either end.
2. Produce latency: one producer sends `--rate` keyed 1 KiB records a second (acks=all, linger.ms=0,
   idempotence off: one record per request) into a second compacted topic; each record's latency is
   librdkafka's own (`Message.latency()`: produce() to the acknowledgement). First for `--seconds` into the
   new, held topic while the cleaner has nothing to do ("idle"; the first second not counted); then the topic
   gets `--mb` of dirty records like the first, the producer starts again, the topic is released after 1 s,
   and the records sent between the "cleaning offsets" line and the "cleaned" line are counted ("cleaner
   busy"; at most 60 s). That window holds the cleaner thread's work, the wait for the next tick and the swap
   on the event loop. Per 250 ms of send time, count, median and max latency go to the .json ("timeline").
   The page cache is written back (sync) after each fill and before the idle window.

The machine may be shared: for each measured window the report gives the cores that processes other than
the broker and the benchmark kept busy (/proc/stat, less the two processes' own CPU).

Writes bench/results/compaction.md and .json; `bench/compare.py --only compaction` runs it as a part.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import sys
import tempfile
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

import brokers
import native
from workloads import cpu_seconds, create_topic, machine, percentile

SEGMENT_BYTES = 8 * 1024 * 1024
HOLD_MS = 86_400_000  # min.compaction.lag.ms while a topic is filled: nothing of it is cleanable
RECORD_BYTES = 1024
FILL_CAP_S = 90.0
CLEAN_CAP_S = 120.0
BUSY_CAP_S = 60.0
_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
_STARTED = re.compile(r"/([^/\s]+)-0: cleaning offsets \[(\d+), (\d+)\) of (\d+) segments")
_CLEANED = re.compile(r"/([^/\s]+)-0: cleaned \[(\d+), (\d+)\): (\d+) bytes read, (\d+) written")


def log(msg: str) -> None:
    print(f"[compaction] {msg}", file=sys.stderr, flush=True)


def busy_cpu_s() -> float:
    """CPU seconds the whole machine spent busy so far (/proc/stat: every state but idle and iowait)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """How many cores processes other than the broker and this one kept busy from now on: the machine is
    shared, and a figure measured beside other work says so."""

    def __init__(self, broker_pid: int) -> None:
        self.pid = broker_pid
        self.t0, self.all0 = time.perf_counter(), busy_cpu_s()
        self.broker0, self.self0 = cpu_seconds(broker_pid), time.process_time()

    def cores(self) -> float:
        wall = time.perf_counter() - self.t0
        ours = (cpu_seconds(self.pid) - self.broker0) + (time.process_time() - self.self0)
        return max(0.0, (busy_cpu_s() - self.all0 - ours) / wall)


def odradek_cleaner_command(port: int, data_dir: str) -> list[str]:
    return [sys.executable, "-m", "odradek", "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data_dir,
            "--log-level", "INFO", "--set", "log.cleaner.backoff.ms=100"]


class BrokerLog:
    """The cleaner's lines of the broker's log, read as they come: (epoch seconds of the line, match)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.started: list[tuple[float, re.Match]] = []
        self.cleaned: list[tuple[float, re.Match]] = []
        self._rest = b""

    def read(self) -> None:
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        self.offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for raw in lines:
            line = raw.decode(errors="replace")
            stamp = _LOG_LINE.match(line)
            if stamp is None:
                continue
            when = time.mktime(time.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S")) + int(stamp.group(2)) / 1000
            for pattern, into in ((_STARTED, self.started), (_CLEANED, self.cleaned)):
                m = pattern.search(line)
                if m is not None:
                    into.append((when, m))

    def of(self, which: list, topic: str) -> list[tuple[float, re.Match]]:
        return [(t, m) for t, m in which if m.group(1) == topic]


def log_files(pdir: str) -> dict[int, tuple[int, float]]:
    """{segment base offset: (size, mtime)} of the partition's .log files."""
    out = {}
    for entry in os.scandir(pdir):
        if entry.name.endswith(".log") and len(entry.name) == 24:
            try:
                st = entry.stat()
            except FileNotFoundError:  # removed by a swap meanwhile
                continue
            out[int(entry.name[:20])] = (st.st_size, st.st_mtime)
    return out


def newest_mtime(pdir: str, below: int) -> float:
    """The newest mtime of the .log, .index and .timeindex files of segments with a base below `below`."""
    newest = 0.0
    for entry in os.scandir(pdir):
        stem, _, suffix = entry.name.partition(".")
        if len(stem) == 20 and stem.isdigit() and suffix in ("log", "index", "timeindex") and int(stem) < below:
            try:
                newest = max(newest, entry.stat().st_mtime)
            except FileNotFoundError:
                continue
    return newest


def first_dirty(pdir: str) -> int:
    """The first dirty offset in the partition's cleaner-offset-checkpoint (0: never cleaned)."""
    try:
        with open(os.path.join(pdir, "cleaner-offset-checkpoint")) as fh:
            return int(fh.read().split("\n")[1])
    except (OSError, IndexError, ValueError):
        return 0


def create_compacted(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic, 1, {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                                       "min.cleanable.dirty.ratio": "0.01",
                                       "min.compaction.lag.ms": str(HOLD_MS)})


def release(bootstrap: str, topic: str) -> None:
    """min.compaction.lag.ms=0: every sealed segment of the topic is cleanable from now on."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def key_of(i: int) -> bytes:
    return b"key-%06d" % i


def fill(bootstrap: str, topic: str, total_bytes: int, keys: int) -> dict:
    """Produce total_bytes of RECORD_BYTES records over `keys` keys (acks=all) as fast as one producer goes."""
    count = total_bytes // RECORD_BYTES
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "acks": "all",
                         "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none",
                         "enable.idempotence": False, "queue.buffering.max.messages": 200_000,
                         "message.timeout.ms": int(FILL_CAP_S * 1000)})
    values = [os.urandom(RECORD_BYTES) for _ in range(64)]
    state = {"failed": 0, "first_error": None}

    def report(err, _msg) -> None:
        if err is not None:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or str(err)

    producer.list_topics(topic, timeout=10)
    start = time.perf_counter()
    deadline = start + FILL_CAP_S
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        try:
            producer.produce(topic, values[sent % 64], key_of(sent % keys), partition=0, on_delivery=report)
        except BufferError:
            producer.poll(0.005)
            continue
        sent += 1
        if sent % 1000 == 0:
            producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.perf_counter()))
    seconds = time.perf_counter() - start
    if left or sent < count or state["failed"]:
        raise RuntimeError(f"fill of {topic}: {sent:,} of {count:,} sent in {seconds:.0f} s, {left} undelivered, "
                           f"{state['failed']} failed ({state['first_error']})")
    return {"records": sent, "seconds": seconds, "mb_per_s": sent * RECORD_BYTES / 1e6 / seconds}


class PacedProducer:
    """`rate` keyed records a second on a thread of its own, until stop() or `cap_s`; keeps (send time as
    time.time(), latency in s) of every acknowledged record, and counts the failed."""

    def __init__(self, bootstrap: str, topic: str, rate: int, keys: int, cap_s: float) -> None:
        self.topic, self.rate, self.keys, self.cap_s = topic, rate, keys, cap_s
        self.producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "acks": "all",
                                  "linger.ms": 0, "enable.idempotence": False, "compression.type": "none",
                                  "message.timeout.ms": 30_000})
        self.producer.list_topics(topic, timeout=10)
        self.samples: list[tuple[float, float]] = []
        self.failed = 0
        self.first_error: str | None = None
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "PacedProducer":
        self._thread.start()
        return self

    def _report(self, err, msg, sent_at: float) -> None:
        if err is None:
            self.samples.append((sent_at, msg.latency()))
        else:
            self.failed += 1
            self.first_error = self.first_error or str(err)

    def _run(self) -> None:
        value = os.urandom(RECORD_BYTES)
        total = int(self.rate * self.cap_s)
        start = time.perf_counter()
        while self.sent < total and not self._stop.is_set():
            due = min(total, int((time.perf_counter() - start) * self.rate) + 1)
            while self.sent < due:
                now = time.time()
                try:
                    self.producer.produce(self.topic, value, key_of(self.sent % self.keys), partition=0,
                                          on_delivery=lambda err, msg, t=now: self._report(err, msg, t))
                except BufferError:
                    break
                self.sent += 1
            ahead = self.sent / self.rate - (time.perf_counter() - start)
            self.producer.poll(min(max(ahead, 0.0), 0.005))
        self.producer.flush(30)

    def wait(self, timeout: float) -> None:
        """Until its `cap_s` of records are sent and flushed (or `timeout`)."""
        self._thread.join(timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def latency_figures(samples: list[tuple[float, float]]) -> dict:
    values = sorted(lat * 1000 for _, lat in samples)
    return {"records": len(values), "p50_ms": percentile(values, 0.50), "p99_ms": percentile(values, 0.99),
            "p999_ms": percentile(values, 0.999), "max_ms": values[-1] if values else None,
            "mean_ms": statistics.fmean(values) if values else None}


def timeline(samples: list[tuple[float, float]], origin: float, step: float = 0.25) -> list[list[float]]:
    """[seconds from origin, records sent, their p50 ms, their max ms] per `step` of send time."""
    buckets: dict[int, list[float]] = {}
    for sent_at, lat in samples:
        buckets.setdefault(int((sent_at - origin) // step), []).append(lat * 1000)
    return [[round(i * step, 2), len(v), round(statistics.median(v), 2), round(max(v), 2)]
            for i, v in sorted(buckets.items())]


def wait_cleaned(blog: BrokerLog, pdir: str, topic: str, cap_s: float,
                 after: float) -> tuple[float, re.Match, re.Match, float]:
    """Wait (polling every 20 ms, at most cap_s) for the topic's first cleaning started after `after` (epoch s)
    to be swapped in: its checkpoint reaching the end of the range the cleaner logged. Returns (the
    perf_counter when it was seen, the "cleaning offsets" match and its time, the "cleaned" match)."""
    deadline = time.perf_counter() + cap_s
    started = None
    while time.perf_counter() < deadline:
        blog.read()
        if started is None:
            started = next(((t, m) for t, m in blog.of(blog.started, topic) if t >= after - 1.0), None)
        if started is not None and first_dirty(pdir) >= int(started[1].group(3)):
            seen = time.perf_counter()
            done = None
            for _ in range(100):  # the "cleaned" line follows the checkpoint's write at once
                blog.read()
                done = next((m for t, m in blog.of(blog.cleaned, topic) if t >= started[0]), None)
                if done is not None:
                    break
                time.sleep(0.02)
            if done is None:
                raise RuntimeError(f"{topic}: checkpoint moved but no 'cleaned' line in the broker's log")
            return seen, started[1], done, started[0]
        time.sleep(0.02)
    raise RuntimeError(f"{topic}: not cleaned within {cap_s:.0f} s (started: {started is not None})")


def cleaner_throughput(broker: brokers.BrokerProcess, blog: BrokerLog, data: str, total_bytes: int,
                       keys: int) -> dict:
    topic = "compaction-throughput"
    create_compacted(broker.bootstrap, topic)
    filled = fill(broker.bootstrap, topic, total_bytes, keys)
    log(f"filled {topic}: {filled['records']:,} records in {filled['seconds']:.1f} s ({filled['mb_per_s']:.0f} MB/s)")
    os.sync()  # the fill's writeback is not part of the cleaning
    pdir = os.path.join(data, f"{topic}-0")
    before = log_files(pdir)
    active = max(before)
    dirty = sum(size for base, (size, _) in before.items() if base != active)
    cpu0 = cpu_seconds(broker.pid)
    other = OtherLoad(broker.pid)
    released_wall = time.time()
    t0 = time.perf_counter()
    release(broker.bootstrap, topic)
    seen, started, cleaned, started_at = wait_cleaned(blog, pdir, topic, CLEAN_CAP_S, released_wall)
    seconds = seen - t0
    cpu = cpu_seconds(broker.pid) - cpu0
    after = log_files(pdir)
    # the cleaned segments and their indexes are the renamed files the thread wrote: the newest is its end
    thread_end = newest_mtime(pdir, int(started.group(3)))
    thread_s = thread_end - started_at
    part = {"topic": topic, "fill": filled, "segments_before": len(before), "segments_after": len(after),
            "bytes_before": sum(s for s, _ in before.values()), "bytes_after": sum(s for s, _ in after.values()),
            "dirty_bytes": dirty, "active_bytes": before[active][0], "seconds": seconds,
            "mb_per_s": dirty / 1e6 / seconds, "thread_s": thread_s, "thread_mb_per_s": dirty / 1e6 / thread_s,
            "bytes_read": int(cleaned.group(4)), "bytes_written": int(cleaned.group(5)),
            "cleaned_range": [int(cleaned.group(2)), int(cleaned.group(3))], "broker_cpu_s": cpu,
            "start_delay_s": started_at - released_wall, "other_cores": other.cores()}
    log(f"cleaned {dirty / 1e6:.1f} dirty MB in {seconds:.2f} s ({part['mb_per_s']:.1f} MB/s; cleaner thread "
        f"{thread_s:.2f} s, {part['thread_mb_per_s']:.1f} MB/s); .log bytes {part['bytes_before'] / 1e6:.1f} -> "
        f"{part['bytes_after'] / 1e6:.1f} MB")
    return part


def produce_latency(broker: brokers.BrokerProcess, blog: BrokerLog, data: str, total_bytes: int, keys: int,
                    rate: int, seconds: float) -> dict:
    topic = "compaction-latency"
    create_compacted(broker.bootstrap, topic)
    pdir = os.path.join(data, f"{topic}-0")
    # idle: nothing to clean anywhere (the throughput topic is clean, this one is held)
    os.sync()
    blog.read()
    cleanings_before = len(blog.started)
    t_idle = time.time()
    other = OtherLoad(broker.pid)
    idle = PacedProducer(broker.bootstrap, topic, rate, keys, seconds).start()
    idle.wait(seconds + 60)
    idle.stop()
    idle_other = other.cores()
    blog.read()
    if len(blog.started) != cleanings_before:
        raise RuntimeError("a cleaning ran during the idle latency window")
    idle_part = {**latency_figures([s for s in idle.samples if s[0] >= t_idle + 1.0]), "sent": idle.sent,
                 "failed": idle.failed, "first_error": idle.first_error, "timeline": timeline(idle.samples, t_idle),
                 "other_cores": idle_other}
    log(f"idle: p50 {idle_part['p50_ms']:.2f} ms, p99 {idle_part['p99_ms']:.2f} ms over {idle_part['records']:,}")

    filled = fill(broker.bootstrap, topic, total_bytes, keys)
    log(f"filled {topic}: {filled['records']:,} records in {filled['seconds']:.1f} s")
    os.sync()
    before = log_files(pdir)
    dirty = sum(size for base, (size, _) in before.items() if base != max(before))
    other = OtherLoad(broker.pid)
    busy = PacedProducer(broker.bootstrap, topic, rate, keys, BUSY_CAP_S).start()
    time.sleep(1.0)  # the producer's pace settles before the cleaner starts
    released_wall = time.time()
    try:
        release(broker.bootstrap, topic)
        _, started, cleaned, started_at = wait_cleaned(blog, pdir, topic, BUSY_CAP_S - 5, released_wall)
    finally:
        busy.stop()
    busy_other = other.cores()
    blog.read()
    cleaned_at = next(t for t, m in blog.of(blog.cleaned, topic) if m.group(0) == cleaned.group(0))
    window = [s for s in busy.samples if started_at <= s[0] <= cleaned_at]
    busy_part = {**latency_figures(window), "sent": busy.sent, "failed": busy.failed, "first_error": busy.first_error,
                 "window_s": cleaned_at - started_at, "dirty_bytes": dirty,
                 "before_release": latency_figures([s for s in busy.samples if s[0] < released_wall]),
                 "started_after_release_s": started_at - released_wall,
                 "timeline_from_release": timeline(busy.samples, released_wall), "other_cores": busy_other}
    log(f"cleaner busy ({busy_part['window_s']:.1f} s): p50 {busy_part['p50_ms']:.2f} ms, p99 "
        f"{busy_part['p99_ms']:.2f} ms over {busy_part['records']:,}")
    return {"topic": topic, "rate": rate, "idle": idle_part, "busy": busy_part}


def one_round(total_bytes: int, keys: int, rate: int, seconds: float) -> dict:
    """Both measurements on a broker of their own, started here and stopped (its directory removed) after."""
    spec = brokers.BrokerSpec("odradek-disk", "odradek (disk)", "disk log", odradek_cleaner_command,
                              tempfile.gettempdir())
    broker = brokers.BrokerProcess(spec)
    out = {"filesystem": brokers.fs_type(broker.tmp), "loadavg_1m_at_start": os.getloadavg()[0]}
    t0 = time.perf_counter()
    try:
        blog = BrokerLog(os.path.join(broker.tmp, "broker.log"))
        data = os.path.join(broker.tmp, "data")
        out["throughput"] = cleaner_throughput(broker, blog, data, total_bytes, keys)
        out["latency"] = produce_latency(broker, blog, data, total_bytes, keys, rate, seconds)
    finally:
        out["wall_s"] = time.perf_counter() - t0
        broker.stop()
    return out


def run(mb: int = 200, keys: int = 10_000, rate: int = 2000, seconds: float = 10.0, rounds: int = 3) -> dict:
    """`rounds` rounds, each on a fresh broker; the report shows the median and the range of each figure."""
    part = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "nproc": os.cpu_count(), "loadavg_1m_at_start": os.getloadavg()[0], "mb": mb, "keys": keys,
            "record_bytes": RECORD_BYTES, "segment_bytes": SEGMENT_BYTES, "rate": rate, "idle_seconds": seconds,
            "machine": machine(), "rounds": []}
    t0 = time.perf_counter()
    for i in range(rounds):
        log(f"round {i + 1} of {rounds}")
        part["rounds"].append(one_round(mb * 1_000_000, keys, rate, seconds))
    part["wall_s"] = time.perf_counter() - t0
    part["filesystem"] = part["rounds"][0]["filesystem"]
    return part


def _cell(part: dict, get, fmt: str) -> str:
    """The median over the rounds, and [lowest–highest] when there are several."""
    values = [get(r) for r in part["rounds"]]
    text = fmt.format(statistics.median(values))
    return text if len(values) == 1 else f"{text} [{fmt.format(min(values))}–{fmt.format(max(values))}]"


def render(part: dict) -> str:
    n = len(part["rounds"])
    first = part["rounds"][0]["throughput"]
    lines = ["## Log compaction (bench/compaction.py)", "",
             f"{part['when']}; {part['nproc']} cores, load average {part['loadavg_1m_at_start']:.2f} at the start; "
             f"one odradek broker per round (disk log on {part['filesystem']}), compacted topics of one partition, "
             f"segment.bytes {part['segment_bytes'] // 2**20} MiB; {part['mb']} MB of "
             f"{part['record_bytes']}-byte records over {part['keys']:,} keys per topic; "
             + (f"median of {n} rounds [lowest–highest]." if n > 1 else "one round."), "",
             "| cleaner throughput | |", "|---|---:|"]
    t = lambda key: (lambda r: r["throughput"][key])  # noqa: E731
    rows = [
        ("dirty data cleaned (sealed segments, MB)", lambda r: r["throughput"]["dirty_bytes"] / 1e6, "{:,.1f}"),
        (".log MB before", lambda r: r["throughput"]["bytes_before"] / 1e6, "{:,.1f}"),
        (".log MB after (with the active segment, never cleaned)",
         lambda r: r["throughput"]["bytes_after"] / 1e6, "{:,.1f}"),
        ("release → swapped in (s)", t("seconds"), "{:.2f}"),
        ("**MB/s of dirty data, release → swapped in**", t("mb_per_s"), "{:.1f}"),
        ("cleaner thread: start line → last segment written (s)", t("thread_s"), "{:.2f}"),
        ("MB/s of dirty data, cleaner thread", t("thread_mb_per_s"), "{:.1f}"),
        ("release → cleaning started (s; the 1 s tick)", t("start_delay_s"), "{:.2f}"),
        ("broker CPU over the cleaning (s)", t("broker_cpu_s"), "{:.2f}"),
        ("other processes on the machine meanwhile (cores)", t("other_cores"), "{:.2f}"),
    ]
    for label, get, fmt in rows:
        cell = _cell(part, get, fmt)
        if label.startswith("**"):
            median, _, spread = cell.partition(" ")
            cell = f"**{median}** {spread}".strip()
        lines.append(f"| {label} | {cell} |")
    lines.append(f"| segments before → after | {first['segments_before']} → {first['segments_after']} "
                 f"(round 1; the cleaner's first pass rewrites each 8 MiB segment into one of its own) |")
    lines += ["", f"Produce latency: {part['rate']:,} keyed 1 KiB records/s, acks=all, linger.ms=0 (one record per "
              "request); librdkafka's produce() → acknowledgement, ms.", "",
              "| window | records | p50 | p99 | p99.9 | max | failed | other processes (cores) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, key in (("cleaner idle (nothing cleanable)", "idle"),
                       ("cleaner busy (the cleaning of the topic's dirty log)", "busy")):
        get = lambda field, key=key: (lambda r: r["latency"][key][field])  # noqa: E731
        lines.append(f"| {label} | {_cell(part, get('records'), '{:,}')} | {_cell(part, get('p50_ms'), '{:.1f}')} | "
                     f"{_cell(part, get('p99_ms'), '{:.1f}')} | {_cell(part, get('p999_ms'), '{:.1f}')} | "
                     f"{_cell(part, get('max_ms'), '{:.1f}')} | "
                     f"{sum(r['latency'][key]['failed'] for r in part['rounds'])} | "
                     f"{_cell(part, get('other_cores'), '{:.2f}')} |")
    busy = lambda field: (lambda r: r["latency"]["busy"][field])  # noqa: E731
    lines += ["", f"The busy window: {_cell(part, lambda r: r['latency']['busy']['dirty_bytes'] / 1e6, '{:.0f}')} MB "
              f"dirty, cleaned in {_cell(part, busy('window_s'), '{:.1f}')} s under this load (the window: "
              "\"cleaning offsets\" to \"cleaned\" in the broker's log).", ""]
    if n > 1:  # the busy latency is bimodal (the broker keeps up with the producer or not): every round
        lines += ["| round | cleaner MB/s (thread) | idle p50 / p99 ms | busy p50 / p99 ms | busy window s | "
                  "other processes, cores (cleaning / idle / busy) |", "|---:|---:|---:|---:|---:|---:|"]
        for i, r in enumerate(part["rounds"], 1):
            t, idle, b = r["throughput"], r["latency"]["idle"], r["latency"]["busy"]
            lines.append(f"| {i} | {t['mb_per_s']:.1f} ({t['thread_mb_per_s']:.1f}) | {idle['p50_ms']:.1f} / "
                         f"{idle['p99_ms']:.1f} | {b['p50_ms']:.1f} / {b['p99_ms']:.1f} | {b['window_s']:.1f} | "
                         f"{t['other_cores']:.2f} / {idle['other_cores']:.2f} / {b['other_cores']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="dirty data per topic, in MB of 1 KiB records")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=2000, help="records a second of the latency producer")
    parser.add_argument("--seconds", type=float, default=10.0, help="the idle latency window")
    parser.add_argument("--rounds", type=int, help="rounds, each on a fresh broker (median; default 3)")
    parser.add_argument("--quick", action="store_true", help="--mb 50 --seconds 6, one round unless --rounds")
    args = parser.parse_args()
    if args.quick:
        args.mb, args.seconds = 50, 6.0
    rounds = args.rounds if args.rounds else (1 if args.quick else 3)
    return native.publish("compaction", run(args.mb, args.keys, args.rate, args.seconds, max(1, rounds)), render)


if __name__ == "__main__":
    sys.exit(main())
