"""Side-by-side benchmark: odradek against peer Kafka-compatible brokers, one after the other in one run.

Usage:  .venv/bin/python bench/compare.py [--quick] [--rounds N] [--clients N] [--only KEY,KEY]
                                         [--odradek-src DIR] [--out-dir DIR]

Starts each broker configuration on a free loopback port (odradek on disk, odradek on tmpfs, Tansu,
Apache Kafka, noida-db; see brokers.py), runs the same confluent-kafka workloads against it (see workloads.py),
stops it, and prints markdown tables with absolute figures, each odradek configuration's ratio to the best peer,
odradek (disk)'s ratio to Apache Kafka and, for throughput, the fraction of the machine's loopback TCP
bandwidth. The report also goes to bench/results/latest.md and the raw figures to bench/results/latest.json. A
broker that cannot start, or a workload it does not support, is shown as n/a with the reason; nothing here
raises past a workload.

After the brokers comes the cluster part (bench/cluster.py: three odradek brokers with replication factor 3
against one, and failover times), with a time budget of its own; `--only` without `cluster` leaves it out.
Then the fault part (bench/faults.py: failover percentiles, a rolling restart, a wiped replica's catch-up),
left out by an `--only` without `faults`. Last the security part (bench/security.py: 1 KiB produce and
consume over PLAINTEXT, SSL and SASL_SSL, and the broker's memory with 1,000 idle TLS connections), left out
by an `--only` without `security`. Then the native part (bench/native.py: 1 KiB produce and consume with
franz-go, a Go client, against loopback bandwidth; n/a without `go`), left out by an `--only` without `native`.
Then the compaction part (bench/compaction.py: the log cleaner's MB/s, produce latency while it cleans), left
out by an `--only` without `compaction`. Last the share part (bench/share_groups.py: a share group of three
consumers accepting every record against a classic group, and redelivery after a lock timeout), left out by an
`--only` without `share`.
`--odradek-src DIR` adds a column: odradek (disk) run from another checkout's src, counted as a peer.

Each throughput row is run by three client processes at once (--clients N): one Python client keeps a core
busy with its own loop, and with it alone the 100 B rows measured the client rather than the broker. Two
were still each bound by their own Python thread, with a tenth to a quarter of a core idle; with three,
broker and clients together keep both cores of a 2-core machine busy, so a broker's CPU per record
decides how fast the clients go. A produce row's clients each produce their records into the row's topic; a
consume row's clients each read the whole topic (workloads.ClientPool).

One throughput run varies by ±25% on a small machine, so the throughput rows are run in rounds (5, or 1
with --quick): each round starts every broker afresh, in turn, round r at the r-th broker and backwards every
other round (noida-db last in each: brokers.py), and the report shows the median. After each broker stops,
the page cache's dirty data is written back (sync) before the next one starts; an untimed warm-up begins
every round. Start-up, latency, consumer group and memory are measured
in round 1 only, to keep the run short.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid

import brokers
from workloads import ClientPool, CpuMeter, create_topic, group_first_record, latency, machine, rates, size_label

SIZES = (100, 1024)
PARTITIONS = (1, 8)
ACKS = ("1", "all")
LATENCY_RATE = 10_000


DEFAULT_CLIENTS = 3


class Config:
    def __init__(self, quick: bool, rounds: int | None = None, clients: int = DEFAULT_CLIENTS) -> None:
        self.quick = quick
        self.rounds = max(1, rounds) if rounds else (1 if quick else 5)
        self.clients = max(1, clients)
        self.pool: ClientPool | None = None  # started by main() for a run, not for --from-json
        self.warm_up_s = 0.0  # how long the first warm-up took (each later round starts with one)
        if quick:
            self.records = {100: 200_000, 1024: 60_000}
            self.cap_s, self.latency_s, self.warmup_s = 2.0, 3.0, 0.5
            self.group_cap_s, self.start_repeats, self.loopback_s = 10.0, 1, 1
            self.budget_s = 240.0
        else:
            self.records = {100: 400_000, 1024: 160_000}  # per client
            self.cap_s, self.latency_s, self.warmup_s = 8.0, 10.0, 1.0
            self.group_cap_s, self.start_repeats, self.loopback_s = 30.0, 3, 3
            self.budget_s = 14 * 60.0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def short(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "/")
    return text if len(text) <= limit else text[:limit] + "…"


def tp_key(kind: str, size: int, partitions: int, acks: str | None = None) -> str:
    part = f"{partitions} partition" + ("s" if partitions > 1 else "")
    return f"{kind} {size_label(size)}, {part}" + (f", acks={acks}" if acks else "")


def throughput_keys() -> list[str]:
    keys = []
    for kind in ("produce", "consume"):
        for size in SIZES:
            for partitions in PARTITIONS:
                if kind == "produce":
                    keys += [tp_key(kind, size, partitions, acks) for acks in ACKS]
                else:
                    keys.append(tp_key(kind, size, partitions))
    return keys


# --------------------------------------------------------------------------------------------------
# One broker


def new_result(spec: brokers.BrokerSpec) -> dict:
    """The JSON record of one broker; "throughput" maps a workload to {"rounds": [one result per round]}."""
    return {"key": spec.key, "title": spec.title, "storage": spec.storage, "is_peer": spec.is_peer,
            "error": spec.unavailable, "start": None, "rss": {}, "throughput": {}, "latency": None,
            "group": None, "loadavg_1m_at_start": [], "round_s": []}


def has_rate(t: dict) -> bool:
    return "na" not in t and bool(t.get("records"))


def guard(proc: brokers.BrokerProcess, run_deadline: float):
    """attempt(fn) for workloads against `proc`: any failure becomes an n/a entry, so nothing raises past a
    workload. Past the run's deadline it starts nothing and marks the entry `skipped`, which a later round
    drops instead of counting it as a failed round."""

    def attempt(fn) -> dict | None:
        if not proc.alive():
            return {"na": f"broker exited (status {proc.exit_status()}) before this workload"}
        if time.monotonic() > run_deadline:
            return {"na": "skipped: the run's time budget was used up", "skipped": True}
        try:
            return fn()
        except Exception as exc:  # any client or broker failure becomes an n/a cell
            out = {"na": short(exc)}
            if not proc.alive():
                out["na"] += f" (broker exited, status {proc.exit_status()})"
            return out

    return attempt


def throughput_plan() -> list[tuple[int, int, str, bool]]:
    """The throughput rows in order, as (size, partitions, acks, read back): every size, partition count and
    acks; each acks=1 topic is read back by a consume row right after it is written."""
    return [(size, partitions, acks, acks == "1") for size in SIZES for partitions in PARTITIONS for acks in ACKS]


def run_throughput(proc, cfg: Config, attempt, skip: set[str], plan: list[tuple[int, int, str, bool]] | None = None,
                   create=None) -> tuple[dict, int]:
    """Every throughput workload of `plan` (default: throughput_plan()) not in `skip` against `proc` (a
    brokers.BrokerProcess, or anything with its bootstrap, pid, alive() and exit_status()), run by the run's
    client processes together: in a produce row each client produces `cfg.records` records into one fresh
    topic, in a consume row each client reads back everything that produce row just wrote (as consumers in
    separate groups would). `create(topic, partitions)` makes a topic (default: replication factor 1 on
    `proc`). Returns ({workload: result}, payload bytes stored).

    An untimed warm-up comes first: the clients produce a fifth of a 100 B row into a topic of its own, so the
    first timed row does not also pay for a broker process and client connections that have not run yet."""
    create = create or (lambda topic, partitions: create_topic(proc.bootstrap, topic, partitions))
    run_id = uuid.uuid4().hex[:6]
    out: dict[str, dict] = {}
    stored = 0
    attempt(lambda: produce_untimed(cfg, proc, f"bench-{run_id}-warmup", cfg.records[SIZES[0]] // 5, create))
    for size, partitions, acks, read_back in plan or throughput_plan():
        key = tp_key("produce", size, partitions, acks)
        if key in skip:  # its consume failed too ("nothing was produced"), so it is in skip as well
            continue
        topic = f"bench-{run_id}-{size}b-p{partitions}-acks{acks}"
        made = attempt(lambda: create(topic, partitions))
        if made and "na" in made:
            r = dict(made, na=f"create topic with {partitions} partitions: {made['na']}")
        else:
            r = attempt(lambda: rates(cfg.pool.run(
                "produce", cfg.cap_s, proc.pid, bootstrap=proc.bootstrap, topic=topic, size=size,
                count=cfg.records[size], acks=acks), size))
        r.setdefault("target", cfg.records[size] * cfg.clients)
        out[key] = r
        stored += r.get("records", 0) * size
        log(f"  {key}: " + (r["na"] if "na" in r else f"{r['msgs_per_s']:,.0f} msg/s"))
        ckey = tp_key("consume", size, partitions)
        if not read_back or ckey in skip:
            continue

        def read_back_rows() -> dict:
            if not has_rate(r):
                return {"na": "nothing was produced to read"}
            return dict(rates(cfg.pool.run(
                "consume", cfg.cap_s, proc.pid, bootstrap=proc.bootstrap, topic=topic, size=size,
                count=r["records"], partitions=partitions), size), target=r["records"] * cfg.clients)

        out[ckey] = c = attempt(read_back_rows)
        log(f"  {ckey}: " + (c["na"] if "na" in c else f"{c['msgs_per_s']:,.0f} msg/s"))
    return out, stored


def produce_untimed(cfg: Config, proc, topic: str, count: int, create=None) -> None:
    """Load `proc` without measuring: the clients each produce `count` 100 B records into a new `topic`
    (made by `create(topic, 1)`, default: replication factor 1 on `proc`)."""
    (create or (lambda name, partitions: create_topic(proc.bootstrap, name, partitions)))(topic, 1)
    cfg.pool.run("produce", cfg.cap_s, proc.pid, bootstrap=proc.bootstrap, topic=topic, size=SIZES[0],
                 count=count, acks="1")


def stop_and_settle(proc: brokers.BrokerProcess) -> int | None:
    """Stop `proc`, then write back the page cache's dirty data before the next broker starts: a broker that
    saves gigabytes at exit (noida-db) or leaves them in segment files would otherwise have the kernel
    writing them back, on the same two cores, during the next broker's workloads."""
    code = proc.stop()
    os.sync()
    time.sleep(0.5)
    return code


def bench_broker(res: dict, spec: brokers.BrokerSpec, cfg: Config, run_deadline: float) -> None:
    """Round 1 for one broker, into `res`: start-up time, idle RSS, the throughput workloads with RSS
    sampled during them, then latency and the consumer group on the same process."""
    samples = []
    proc = None
    for i in range(cfg.start_repeats):
        try:
            proc = brokers.BrokerProcess(spec)
        except (RuntimeError, OSError) as exc:
            res["error"] = f"cannot start: {exc}"
            return
        samples.append({"accept_s": proc.accept_s, "api_s": proc.api_s, "prepare_s": proc.prepare_s})
        if i < cfg.start_repeats - 1:
            proc.stop()
    res["start"] = {"accept_s": statistics.median(s["accept_s"] for s in samples),
                    "api_s": statistics.median(s["api_s"] for s in samples),
                    # before Popen(), not in the two above: Apache Kafka's `kafka-storage format` (~0 for the others)
                    "prepare_s": statistics.median(s["prepare_s"] for s in samples), "samples": samples}
    log(f"  started: accept {res['start']['accept_s'] * 1000:.1f} ms, ApiVersions "
        f"{res['start']['api_s'] * 1000:.1f} ms (median of {len(samples)}); pid {proc.pid}, {proc.bootstrap}")
    bootstrap = proc.bootstrap
    run_id = uuid.uuid4().hex[:6]
    attempt = guard(proc, run_deadline)

    try:
        t_round = time.monotonic()
        time.sleep(1.0)
        res["rss"]["idle"] = brokers.rss_bytes(proc.pid)
        sampler = brokers.RssSampler(proc.pid)
        tp, stored = run_throughput(proc, cfg, attempt, set())
        res["throughput"] = {key: {"rounds": [dict(t, round=1)]} for key, t in tp.items()}
        res["round_s"].append(proc.prepare_s + proc.api_s + time.monotonic() - t_round)  # what a later round takes
        res["rss"]["peak_load"] = sampler.stop()
        time.sleep(2.0)
        res["rss"]["after_load"] = brokers.rss_bytes(proc.pid)
        res["rss"]["stored_payload_bytes"] = stored
        res["rss"]["data_dir_bytes"] = proc.stored_bytes()

        # The latency row measures the broker at 10,000 msgs/s, not the kernel writing back the gigabytes the
        # throughput rows just stored: those are synced first.
        os.sync()
        lat_topic = f"bench-{run_id}-latency"
        made = attempt(lambda: create_topic(bootstrap, lat_topic, 1))
        cpu, t_cpu = CpuMeter(proc.pid), time.perf_counter()
        res["latency"] = made if made and "na" in made else attempt(
            lambda: latency(bootstrap, lat_topic, LATENCY_RATE, cfg.latency_s, cfg.warmup_s))
        lat = res["latency"]
        if "na" not in lat and lat["send_rate"] < 0.95 * LATENCY_RATE:
            lat["note"] = (f"the paced producer only reached {lat['send_rate']:,.0f} msg/s "
                           f"(machine too busy?)")
        broker_cpu_s = cpu.used().get("broker_cpu_s")
        if "na" not in lat and broker_cpu_s is not None:
            lat["broker_cpu_pct"] = broker_cpu_s / (time.perf_counter() - t_cpu) * 100
        log("  latency: " + (lat["na"] if "na" in lat else
                             f"p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, p99.9 {lat['p999_ms']} ms"))

        grp_topic = f"bench-{run_id}-group"
        made = attempt(lambda: create_topic(bootstrap, grp_topic, 1))
        res["group"] = made if made and "na" in made else attempt(
            lambda: group_first_record(bootstrap, grp_topic, cfg.group_cap_s))
        log(f"  group: {res['group']}")
        if not proc.alive():
            res["exited"] = proc.proc.returncode
    finally:
        if not proc.alive():
            res["log_tail"] = proc.log_tail(1500)
        code = stop_and_settle(proc)
        res["exit_status"] = code


def throughput_round(res: dict, spec: brokers.BrokerSpec, cfg: Config, run_deadline: float, rnd: int) -> None:
    """A later round for one broker: a fresh process runs the throughput workloads again, appending each
    result to its workload's rounds in `res`. Workloads without a rate in round 1 are not run again: they
    would only fail again, each at up to the time cap."""
    skip = {key for key, entry in res["throughput"].items() if not has_rate(entry["rounds"][0])}
    t0 = time.monotonic()
    try:
        proc = brokers.BrokerProcess(spec)
        try:
            time.sleep(1.0)  # as in round 1, where the idle RSS is read here
            tp, _ = run_throughput(proc, cfg, guard(proc, run_deadline), skip)
        finally:
            stop_and_settle(proc)
    except Exception as exc:  # cannot start, or worse: this round is n/a for the broker, the run goes on
        tp = {key: {"na": f"round {rnd}: {short(exc)}"} for key in res["throughput"] if key not in skip}
    for key, t in tp.items():
        if not t.get("skipped"):  # the time budget ran out: a round not run, not a failed one
            res["throughput"][key]["rounds"].append(dict(t, round=rnd))
    res["round_s"].append(time.monotonic() - t0)


def median_over_rounds(rounds: list[dict]) -> dict:
    """Median msgs/s and MB/s of one workload over the rounds that produced a rate, and the msgs/s range.
    A round that failed or read nothing is left out (the report notes it) rather than counted as 0, so one
    bad round does not decide a median; a round that hit the time cap counts with its rate over what it
    did in time."""
    ok = [t for t in rounds if has_rate(t)]
    out = {"measured": len(ok), "of": len(rounds), "capped": any(t.get("capped") for t in ok)}
    for field in ("msgs_per_s", "mb_per_s"):
        out[field] = statistics.median(t[field] for t in ok) if ok else None
    for field in ("broker_cpu_s", "client_cpu_s"):  # per million records, then as cores over the run
        per_m = [t[field] / t["records"] * 1e6 for t in ok if t.get(field) is not None]
        out[field.replace("_s", "_per_m")] = statistics.median(per_m) if per_m else None
        cores = [t[field] / t["seconds"] for t in ok if t.get(field) is not None and t["seconds"] > 0]
        out[field.replace("_s", "_cores")] = statistics.median(cores) if cores else None
    out["msgs_per_s_min"] = min((t["msgs_per_s"] for t in ok), default=None)
    out["msgs_per_s_max"] = max((t["msgs_per_s"] for t in ok), default=None)
    return out


# --------------------------------------------------------------------------------------------------
# Report


class Notes:
    def __init__(self) -> None:
        self.items: list[str] = []

    def ref(self, text: str) -> str:
        if text not in self.items:
            self.items.append(text)
        return f"[{self.items.index(text) + 1}]"

    def render(self, title: str) -> list[str]:
        """The numbered notes under a heading (nothing when there are none), as report lines."""
        if not self.items:
            return []
        return [f"\n### {title}\n"] + [f"{i}. " + text.replace("|", "/").replace("\n", " ")
                                        for i, text in enumerate(self.items, 1)]


def fmt_ratio(value, best) -> str:
    if value is None or best is None or best == 0:
        return "–"
    return f"{value / best:.2f}×"


def best_peer(values: dict, peers: list[str], higher_better: bool):
    got = [values[k] for k in peers if values.get(k) is not None]
    if not got:
        return None
    return max(got) if higher_better else min(got)


def short_rate(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}k"


def round_issue(t: dict) -> str | None:
    """What went wrong in one round of one throughput workload, for the notes; None if nothing did."""
    if "na" in t:
        return t["na"]
    if not t.get("records"):
        why = t.get("first_error") or f"no record within the {t['seconds']:.0f} s cap"
        if t.get("client_log"):
            why += f"; librdkafka logged: {t['client_log']}"
        return f"0 of {t.get('target', 0):,} records: {why}"
    if t.get("failed") or t.get("first_error"):
        return f"{t.get('failed', 0)} failed; first error: {t.get('first_error')}"
    if t.get("capped") and t.get("client_log"):
        return f"librdkafka logged: {t['client_log']}"
    return None


def header(info: dict, cfg: Config, wall_s: float) -> list[str]:
    """The report's title, date and machine lines."""
    out = [f"# odradek side by side{' (--quick)' if cfg.quick else ''}\n",
           f"- date: {info['date']}; wall time {wall_s / 60:.1f} min; load average (1 min) at start "
           f"{info['loadavg_1m']}",
           f"- machine: {info['nproc']} cores, {info['platform']}, Python {info['python']}"]
    if info.get("odradek"):
        out.append(f"- odradek imported from {info['odradek']}")
    return out


def cluster_module():
    """bench/cluster.py. It imports this module as `compare`; when this file runs as __main__, that is this
    module, not a second copy of it."""
    sys.modules.setdefault("compare", sys.modules[__name__])
    import cluster

    return cluster


def faults_module():
    """bench/faults.py (which imports bench/cluster.py, which imports this module as `compare`)."""
    cluster_module()
    import faults

    return faults


def security_module():
    """bench/security.py (it imports bench/workloads.py, as this module does)."""
    import security

    return security


def native_module():
    """bench/native.py (the Go load generator of tests/franz)."""
    import native

    return native


def compaction_module():
    """bench/compaction.py (the log cleaner's throughput and produce latency while it runs)."""
    import compaction

    return compaction


def share_module():
    """bench/share_groups.py (share groups against a classic group, redelivery after a lock timeout)."""
    import share_groups

    return share_groups


def report(info: dict, cfg: Config, results: list[dict], loop: dict, wall_s: float, run: dict,
           cluster_part: dict | None, faults_part: dict | None = None, security_part: dict | None = None,
           native_part: dict | None = None, compaction_part: dict | None = None,
           share_part: dict | None = None) -> str:
    """render() of the brokers (only the header when none ran), then the cluster, fault, security, native,
    compaction and share parts' sections."""
    text = render(info, cfg, results, loop, wall_s, run) if results else "\n".join(header(info, cfg, wall_s)) + "\n"
    if cluster_part is not None:
        text += "\n" + cluster_module().render(cluster_part)
    if faults_part is not None:
        text += "\n" + faults_module().render(faults_part)
    if security_part is not None:
        text += "\n" + security_module().render(security_part)
    if native_part is not None:
        text += "\n" + native_module().render(native_part)
    if compaction_part is not None:
        text += "\n" + (f"## Log compaction (bench/compaction.py)\n\nn/a: {compaction_part['na']}\n"
                         if "na" in compaction_part else compaction_module().render(compaction_part))
    if share_part is not None:
        text += "\n" + (f"## Share groups (bench/share_groups.py)\n\nn/a: {share_part['na']}\n"
                         if "na" in share_part else share_module().render(share_part))
    return text


def render(info: dict, cfg: Config, results: list[dict], loop: dict, wall_s: float, run: dict) -> str:
    """The markdown report. `run` is {"requested": rounds asked for, "done": rounds started, "orders":
    [broker keys in each round's order], "stopped_early": why fewer rounds were run, or None}."""
    notes = Notes()
    keys = [r["key"] for r in results]
    titles = {r["key"]: r["title"] for r in results}
    peers = [r["key"] for r in results if r.get("is_peer")]
    ours = [r["key"] for r in results if not r.get("is_peer")]
    by = {r["key"]: r for r in results}
    # One more ratio column: odradek (disk) ÷ Apache Kafka, when both ran.
    kafka_ok = "kafka" in by and not by["kafka"]["error"]
    vs_kafka = "odradek-disk" if kafka_ok and "odradek-disk" in by and not by["odradek-disk"]["error"] else None
    ref_bw = loop.get("reference_bytes_per_s")
    out = header(info, cfg, wall_s)
    w = out.append
    w(f"- client: confluent-kafka {info['confluent_kafka']} / librdkafka {info['librdkafka']}")
    bw = []
    if loop.get("iperf3") is not None:
        bw.append(f"iperf3 (1 stream) {loop['iperf3'] / 1e9:.2f} GB/s")
    elif loop.get("iperf3_error"):
        bw.append(f"iperf3 n/a ({loop['iperf3_error']})")
    if loop.get("python") is not None:
        bw.append(f"Python socket pair {loop['python'] / 1e9:.2f} GB/s")
    elif loop.get("python_error"):
        bw.append(f"Python socket pair n/a ({loop['python_error']})")
    w(f"- loopback TCP bandwidth (the machine's limit; % columns use the higher): {'; '.join(bw)}")
    done = run["done"]
    if done > 1:
        rounds_text = f"median of {done} rounds, brokers interleaved"
        orders = "; ".join(f"{i}. " + ", ".join(titles[k] for k in order)
                           for i, order in enumerate(run["orders"], 1))
        how = (f"each round starts every broker afresh, in turn, runs all throughput rows on fresh topics, stops "
               f"it and syncs the page cache; round r starts at the r-th broker and goes backwards every other "
               f"round, with noida-db last, and an untimed warm-up begins each round ({orders})")
    else:
        rounds_text = "a single round, so no median"
        how = "one run per broker and row; `--rounds N` gives the median of N"
    if run.get("stopped_early"):
        rounds_text += f"; {run['requested']} rounds asked for, but {run['stopped_early']}"
    w(f"- throughput: {rounds_text}: {how}. Start-up, latency, consumer group and memory: round 1 only")
    clients = (f"{cfg.clients} client processes run each row together, their clocks started at one barrier: "
               "in a produce row each produces its own records into the row's topic, in a consume row each reads "
               "the whole topic back (as consumers in separate groups would); a rate is all their records over "
               "the time from the first start to the last finish" if cfg.clients > 1 else
               "one client process runs each row")
    w(f"- throughput clients: {clients}")
    w("- brokers (each started alone, on 127.0.0.1; one stopped before the next starts):")
    for r in results:
        loads = ", ".join(str(x) for x in r.get("loadavg_1m_at_start") or [])
        load = f" (load average when its turns began: {loads})" if loads else ""
        w(f"  - **{r['title']}**: {r['storage']}{load}" + (f" — **n/a: {r['error']}**" if r["error"] else ""))
    w("")

    def cell_error(r: dict, what: str) -> str | None:
        if r["error"]:
            return "n/a " + notes.ref(r["title"] + ": " + r["error"])
        return None

    head = "| workload | " + " | ".join(titles[k] for k in keys) + " | " + " | ".join(
        f"{titles[k]} ÷ best peer" for k in ours) + " |"
    sep = "|---|" + "---:|" * (len(keys) + len(ours))
    if vs_kafka:
        head += f" {titles[vs_kafka]} ÷ {titles['kafka']} |"
        sep += "---:|"
    elif "kafka" in by and "odradek-disk" in by:
        w(f"- no ratio to Apache Kafka: {by['kafka']['error'] or by['odradek-disk']['error']}\n")

    def kafka_ratio(values: dict) -> list[str]:
        return [fmt_ratio(values.get(vs_kafka), values.get("kafka"))] if vs_kafka else []

    vs_kafka_text = f" (and {titles[vs_kafka]} ÷ {titles['kafka']} in the last column)" if vs_kafka else ""

    # Throughput
    w(f"## Throughput ({rounds_text})\n")
    w("msgs/s (in brackets the lowest–highest round), payload MB/s (10^6 B/s) and that as a % of loopback "
      "bandwidth, each the median over the rounds. Ratios: odradek ÷ best peer on median msgs/s"
      f"{vs_kafka_text}, above 1 = odradek faster. † = a round hit the time cap (its rate is over what was done "
      "in time). A row that failed in round 1 was not run again.\n")
    w(head)
    w(sep)
    for key in throughput_keys():
        cells, values = [], {}
        for k in keys:
            r = by[k]
            err = cell_error(r, key)
            if err:
                cells.append(err)
                continue
            entry = r["throughput"].get(key)
            if entry is None:
                cells.append("–")
                continue
            m = median_over_rounds(entry["rounds"])
            issues = [(t["round"], round_issue(t)) for t in entry["rounds"]]
            issues = [(f"round {n}: " if done > 1 else "") + text for n, text in issues if text]
            if m["measured"] == 0 and done > len(entry["rounds"]):
                issues[-1] += " (not run again in later rounds)"
            note = " " + notes.ref(f"{r['title']}, {key}: " + "; ".join(issues)) if issues else ""
            if m["measured"] == 0:
                cells.append("n/a" + note)
                continue
            values[k] = m["msgs_per_s"]
            spread = []
            if m["measured"] > 1:
                spread.append(f"{short_rate(m['msgs_per_s_min'])}–{short_rate(m['msgs_per_s_max'])}")
            if m["measured"] != done:
                spread.append(f"{m['measured']} of {done} rounds")
            spread_text = f" ({', '.join(spread)})" if spread else ""
            pct = f" ({m['mb_per_s'] * 1e6 / ref_bw * 100:.1f}%)" if ref_bw else ""
            mark = " †" if m["capped"] else ""
            cells.append(f"{m['msgs_per_s']:,.0f}/s{spread_text}, {m['mb_per_s']:,.1f} MB/s{pct}{mark}{note}")
        best = best_peer(values, peers, True)
        ratios = [fmt_ratio(values.get(k), best) for k in ours] + kafka_ratio(values)
        w(f"| {key} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    w("")

    # CPU
    w("## Where the CPU goes (median of the rounds)\n")
    w("Per throughput row, over its timed part: CPU seconds per million records used by the broker process, "
      "then by the clients (their Python loops and librdkafka's threads, summed), and in brackets the cores "
      f"each kept busy on average. The machine has {info['nproc']} cores. A client's Python loop runs on one "
      "thread, so a single client above one core while the broker uses a fraction of one is bound by the "
      "client, not the broker; when broker and clients together keep every core busy, the broker's CPU per "
      "record is what it takes from the clients.\n")
    w("| workload | " + " | ".join(f"{titles[k]}: broker / client s per M (cores)" for k in keys) + " |")
    w("|---|" + "---:|" * len(keys))
    for key in throughput_keys():
        cells = []
        for k in keys:
            entry = by[k]["throughput"].get(key) if not by[k]["error"] else None
            m = median_over_rounds(entry["rounds"]) if entry else None
            if not m or m.get("broker_cpu_per_m") is None:
                cells.append("–")
                continue
            cells.append(f"{m['broker_cpu_per_m']:.2f} / {m['client_cpu_per_m']:.2f} "
                         f"({m['broker_cpu_cores']:.2f} / {m['client_cpu_cores']:.2f})")
        w(f"| {key} | " + " | ".join(cells) + " |")
    w("")

    # Everything else
    w("## Latency, start-up, consumer group, memory\n")
    w(f"Lower is better for every row here; ratios = odradek ÷ best (lowest) peer{vs_kafka_text}, below 1 = "
      "odradek better.\n")
    w(head)
    w(sep)

    def row(label: str, getter, fmt, note=None) -> None:
        cells, values = [], {}
        for k in keys:
            r = by[k]
            err = cell_error(r, label)
            if err:
                cells.append(err)
                continue
            try:
                value, why = getter(r)
            except (KeyError, TypeError):
                value, why = None, "not measured"
            if value is None:
                cells.append("n/a " + notes.ref(f"{r['title']}, {label}: {why}") if why else "–")
            else:
                values[k] = value
                extra = note(r) if note else None
                cells.append(fmt(value) + (" " + notes.ref(f"{r['title']}, {label}: {extra}") if extra else ""))
        best = best_peer(values, peers, False)
        ratios = [fmt_ratio(values.get(k), best) for k in ours] + kafka_ratio(values)
        w(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")

    def start_get(field):
        return lambda r: ((r["start"][field], None) if r.get("start") else (None, "not measured"))

    def prepared(field):  # Apache Kafka's storage format, run before Popen(): named, not hidden
        def note(r):
            before = (r.get("start") or {}).get("prepare_s")
            if not before or before < 0.05:
                return None
            return (f"from the broker's Popen(); before it, formatting the fresh log dir (`kafka-storage format`, "
                    f"a JVM of its own) took {before * 1000:,.0f} ms more (format + start: "
                    f"{(before + r['start'][field]) * 1000:,.0f} ms)")
        return note

    n = cfg.start_repeats
    row(f"start → first accepted TCP connection (ms, median of {n})", start_get("accept_s"),
        lambda v: f"{v * 1000:.1f}", note=prepared("accept_s"))
    row(f"start → first ApiVersions response (ms, median of {n})", start_get("api_s"),
        lambda v: f"{v * 1000:.1f}", note=prepared("api_s"))

    def lat_get(field):
        def get(r):
            lat = r.get("latency")
            if lat is None:
                return None, "not measured"
            if "na" in lat:
                return None, lat["na"]
            if lat.get(field) is None:
                return None, f"no record received ({lat.get('first_error')})"
            return lat[field], None
        return get

    for field, name in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
        row(f"end-to-end latency {name} at {LATENCY_RATE:,} msg/s (ms)", lat_get(field), lambda v: f"{v:.2f}",
            note=lambda r, f=field: (r.get("latency") or {}).get("note") if f == "p50_ms" else None)

    def grp_get(field):
        def get(r):
            g = r.get("group")
            if g is None:
                return None, "not measured"
            if "na" in g:
                return None, g["na"]
            if g.get(field) is None:
                what = "assignment" if field == "assigned_s" else "record"
                err = f"; first error: {g['first_error']}" if g.get("first_error") else ""
                err += f"; librdkafka logged: {g['client_log']}" if g.get("client_log") else ""
                return None, f"no {what} within {g['cap_s']:.0f} s{err}"
            return g[field], None
        return get

    row("broker CPU during the latency workload (% of one core)", lat_get("broker_cpu_pct"),
        lambda v: f"{v:.0f}")
    row("lone consumer: subscribe → partitions assigned (s)", grp_get("assigned_s"), lambda v: f"{v:.2f}")
    row("lone consumer: subscribe → first record (s)", grp_get("first_record_s"), lambda v: f"{v:.2f}")

    def rss_get(field):
        return lambda r: ((r["rss"][field], None) if r["rss"].get(field) is not None else (None, "not measured"))

    mb = lambda v: f"{v / 1e6:,.0f}"  # noqa: E731
    row("broker RSS idle, 1 s after start (MB)", rss_get("idle"), mb)
    row("broker RSS peak during round 1's throughput workloads (MB)", rss_get("peak_load"), mb)
    stored = max((r["rss"].get("stored_payload_bytes") or 0) for r in results) / 1e9
    row(f"broker RSS 2 s after round 1's throughput workloads, ~{stored:.1f} GB payload stored (MB)",
        rss_get("after_load"), mb)
    w("")
    w("† a round hit the time cap. Loopback %: payload MB/s ÷ loopback bandwidth (one TCP stream; Kafka framing "
      "and the client's own work are extra).")
    if any(by[k]["error"] is None and by[k]["rss"].get("data_dir_bytes") is not None for k in keys):
        sizes = ", ".join(f"{titles[k]} {by[k]['rss']['data_dir_bytes'] / 1e9:.2f} GB" for k in keys
                          if by[k]["error"] is None and by[k]["rss"].get("data_dir_bytes") is not None)
        w(f"Data directory size after round 1's throughput workloads: {sizes}.")
    out.extend(notes.render("Notes"))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------


WARM_UP_ROWS = 3


def warm_up(cfg: Config) -> float:
    """Load the machine before the first timed row: after a few idle seconds this VM ran the first ~6 s of
    load 10-20 % slower, whichever broker came first (2026-11-23 02:06 UTC: Tansu 752k msgs/s first, 890-952k
    second; odradek 773k first, 950k-1.07M second). A throwaway odradek on tmpfs takes WARM_UP_ROWS 100 B
    produce rows from the clients; nothing of it is reported. Returns the seconds it took."""
    spec = brokers.BrokerSpec("warm-up", "warm-up", "", brokers.odradek_command,
                              "/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    t0 = time.monotonic()
    try:
        proc = brokers.BrokerProcess(spec)
    except (RuntimeError, OSError) as exc:
        log(f"warm-up skipped: {exc}")
        return time.monotonic() - t0
    try:
        for i in range(WARM_UP_ROWS):
            produce_untimed(cfg, proc, f"warm-up-{i}", cfg.records[SIZES[0]])
    except Exception as exc:  # a failed warm-up costs comparability, not the run
        log(f"warm-up stopped: {short(exc)}")
    finally:
        stop_and_settle(proc)
    log(f"warm-up: {time.monotonic() - t0:.1f} s")
    return time.monotonic() - t0


def run_rounds(cfg: Config, specs: list[brokers.BrokerSpec], results: dict, run: dict, t0: float,
               run_deadline: float) -> None:
    """The rounds, each broker in turn, into `results` ({key: new_result()}) and `run`."""
    for rnd in range(1, cfg.rounds + 1):
        live = [spec for spec in specs if results[spec.key]["error"] is None]
        if not live:
            break
        # A round is not started unless it fits: a partial one would give some brokers one more round.
        need = cfg.warm_up_s + sum(results[spec.key]["round_s"][-1] for spec in live) if rnd > 1 else 0.0
        if time.monotonic() + need > run_deadline:
            run["stopped_early"] = (f"a round takes ~{need:.0f} s and the run's time budget had "
                                    f"{max(0.0, run_deadline - time.monotonic()):.0f} s left")
            log(f"round {rnd} not started: {run['stopped_early']}")
            break
        # Round r starts at the r-th broker and goes forwards, or backwards every second round, so no broker
        # always follows the same one; a broker whose stop disturbs the next (brokers.py: last_in_round)
        # comes last, and the next round's warm-up follows it.
        movable = [spec for spec in live if not spec.last_in_round]
        first, step = (rnd - 1) % max(1, len(movable)), (1 if rnd % 2 else -1)
        order = [movable[(first + step * i) % len(movable)] for i in range(len(movable))]
        order += [spec for spec in live if spec.last_in_round]
        if rnd > 1:
            warm_up(cfg)
        run["done"] = rnd
        run["orders"].append([spec.key for spec in order])
        for spec in order:
            res = results[spec.key]
            log(f"== round {rnd}/{cfg.rounds}: {spec.title} ({time.monotonic() - t0:.0f} s into the run)")
            res["loadavg_1m_at_start"].append(round(os.getloadavg()[0], 2))
            if rnd > 1:
                throughput_round(res, spec, cfg, run_deadline, rnd)
                continue
            try:
                bench_broker(res, spec, cfg, run_deadline)
            except Exception as exc:  # belt and braces: one broker never takes the run down
                res["error"] = short(exc)
    if run["done"] and time.monotonic() > run_deadline and not run["stopped_early"]:
        run["stopped_early"] = f"the run's time budget ran out during round {run['done']}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~2 minutes: fewer records, shorter caps")
    parser.add_argument("--rounds", type=int, metavar="N",
                        help="throughput rounds, the median is reported (default 5; 1 with --quick)")
    parser.add_argument("--clients", type=int, metavar="N", default=DEFAULT_CLIENTS,
                        help=f"client processes that run each throughput row together (default {DEFAULT_CLIENTS})")
    parser.add_argument("--only", metavar="KEYS",
                        help="comma-separated subset of: odradek-disk, odradek-shm, odradek-asyncio, tansu, kafka, "
                             "noida, cluster (the cluster part, bench/cluster.py), faults (bench/faults.py), "
                             "security (bench/security.py), native (bench/native.py), compaction (bench/compaction.py), "
                             "share (bench/share_groups.py)")
    parser.add_argument("--odradek-src", metavar="DIR", action="append", default=[],
                        help="one more column: odradek (disk) with DIR (another checkout's src, holding odradek/) "
                             "first on PYTHONPATH, counted as a peer; repeatable")
    parser.add_argument("--from-json", metavar="FILE",
                        help="only re-render the report from a latest.json written earlier")
    parser.add_argument("--out-dir", default=os.path.join(brokers.BENCH, "results"),
                        help="where latest.md and latest.json go (default bench/results)")
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json) as fh:
            saved = json.load(fh)
        cfg = Config(saved["quick"], saved["rounds"]["requested"], saved.get("clients", 1))
        print(report(saved["machine"], cfg, saved["brokers"], saved["loopback"], saved["wall_s"], saved["rounds"],
                     saved.get("cluster"), saved.get("faults"), saved.get("security"), saved.get("native"),
                     saved.get("compaction"), saved.get("share")))
        return 0
    sources = []
    for src in args.odradek_src:
        src = os.path.abspath(src)
        if not os.path.isfile(os.path.join(src, "odradek", "__init__.py")):
            parser.error(f"--odradek-src: no odradek/__init__.py in {src}")
        sources.append(src)
    cfg = Config(args.quick, args.rounds, args.clients)
    t0 = time.monotonic()
    run_deadline = t0 + cfg.budget_s
    info = machine()
    info["odradek"] = brokers.odradek_origin({})

    loop: dict = {}
    log("loopback bandwidth…")
    if brokers.iperf3_path():
        try:
            loop["iperf3"] = brokers.loopback_iperf3(cfg.loopback_s)
        except Exception as exc:
            loop["iperf3_error"] = short(exc)
    else:
        loop["iperf3_error"] = "iperf3 not installed (apt-get install -y iperf3)"
    try:
        loop["python"] = brokers.loopback_python(cfg.loopback_s)
    except Exception as exc:
        loop["python_error"] = short(exc)
    measured = [v for v in (loop.get("iperf3"), loop.get("python")) if v]
    loop["reference_bytes_per_s"] = max(measured) if measured else None

    peers = brokers.ensure_peers(log)
    specs = brokers.specs(peers)
    wanted = {k.strip() for k in args.only.split(",")} if args.only else None
    if wanted is not None:
        specs = [s for s in specs if s.key in wanted]
    for i, src in enumerate(sources, 1):
        env = {"PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
        origin = brokers.odradek_origin(env)
        commit = origin.rsplit(" (", 1)[1].rstrip(")") if origin.endswith(")") else src
        # after the odradek configurations, before the peers
        specs.insert(sum(not s.is_peer for s in specs), brokers.BrokerSpec(
            f"odradek-src{i if len(sources) > 1 else ''}", f"odradek (disk) at {commit}",
            f"as odradek (disk), odradek imported from {origin}", brokers.odradek_command, tempfile.gettempdir(),
            is_peer=True, env=env))
    results = {spec.key: new_result(spec) for spec in specs}
    run = {"requested": cfg.rounds, "done": 0, "orders": [], "stopped_early": None}
    cfg.pool = ClientPool(cfg.clients)
    try:
        cfg.warm_up_s = warm_up(cfg)
        run_rounds(cfg, specs, results, run, t0, run_deadline)
        # The cluster part has a time budget of its own (cluster.Settings), on top of the brokers' one.
        cluster_part = None
        if wanted is None or "cluster" in wanted:
            bench_cluster = cluster_module()
            log(f"== cluster part ({time.monotonic() - t0:.0f} s into the run)")
            cluster_part = bench_cluster.run(cfg, bench_cluster.Settings(cfg.quick))
        faults_part = None
        if wanted is None or "faults" in wanted:
            bench_faults = faults_module()
            log(f"== fault part ({time.monotonic() - t0:.0f} s into the run)")
            faults_part = bench_faults.run(cfg, bench_faults.Settings(cfg.quick))
        security_part = None
        if wanted is None or "security" in wanted:
            log(f"== security part ({time.monotonic() - t0:.0f} s into the run)")
            try:
                security_part = security_module().run(50_000 if cfg.quick else 200_000, 1000)
            except Exception as exc:  # the rest of the report stands without it
                log(f"security part failed: {short(exc)}")
        native_part = None
        if wanted is None or "native" in wanted:
            log(f"== native part ({time.monotonic() - t0:.0f} s into the run)")
            try:
                native_part = native_module().run(200_000 if cfg.quick else 1_000_000)
            except Exception as exc:  # shown as n/a with the reason (e.g. no `go`)
                native_part = {"na": short(exc)}
        compaction_part = None
        if wanted is None or "compaction" in wanted:
            log(f"== compaction part ({time.monotonic() - t0:.0f} s into the run)")
            try:
                compaction_part = compaction_module().run(50 if cfg.quick else 200,
                                                          seconds=6.0 if cfg.quick else 10.0,
                                                          rounds=1 if cfg.quick else 3)
            except Exception as exc:  # shown as n/a with the reason
                log(f"compaction part failed: {short(exc)}")
                compaction_part = {"na": short(exc)}
        share_part = None
        if wanted is None or "share" in wanted:
            log(f"== share part ({time.monotonic() - t0:.0f} s into the run)")
            try:
                share_part = share_module().run(30_000, rounds=1 if cfg.quick else 3)
            except Exception as exc:  # shown as n/a with the reason
                log(f"share part failed: {short(exc)}")
                share_part = {"na": short(exc)}
    finally:
        cfg.pool.close()
    results = list(results.values())
    for r in results:
        for entry in r["throughput"].values():
            entry["median"] = median_over_rounds(entry["rounds"])
    wall = time.monotonic() - t0
    text = report(info, cfg, results, loop, wall, run, cluster_part, faults_part, security_part, native_part,
                  compaction_part, share_part)
    print(text)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "latest.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(args.out_dir, "latest.json"), "w") as fh:
        json.dump({"machine": info, "quick": cfg.quick, "clients": cfg.clients, "wall_s": wall, "loopback": loop,
                   "rounds": run, "peers": {k: v for k, v in peers.items()}, "brokers": results,
                   "cluster": cluster_part, "faults": faults_part, "security": security_part,
                   "native": native_part, "compaction": compaction_part, "share": share_part}, fh, indent=2,
                  default=str)
    log(f"wrote {os.path.join(args.out_dir, 'latest.md')} and latest.json; wall time {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
