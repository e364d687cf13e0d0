"""Side-by-side benchmark: odradek against peer Kafka-compatible brokers, one after the other in one run.

Usage:  .venv/bin/python bench/compare.py [--quick] [--only KEY,KEY] [--out-dir DIR]

Starts each broker configuration on a free loopback port (odradek on disk, odradek on tmpfs, Tansu,
noida-db; see brokers.py), runs the same confluent-kafka workloads against it (see workloads.py), stops
it, and prints markdown tables with absolute figures, each odradek configuration's ratio to the best peer
and, for throughput, the fraction of the machine's loopback TCP bandwidth. The report also goes to
bench/results/latest.md and the raw figures to bench/results/latest.json. A broker that cannot start, or
a workload it does not support, is shown as n/a with the reason; nothing here raises past a workload.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid

import brokers
from workloads import consume, create_topic, group_first_record, latency, machine, produce, rates, size_label

SIZES = (100, 1024)
PARTITIONS = (1, 8)
ACKS = ("1", "all")
LATENCY_RATE = 10_000


class Config:
    def __init__(self, quick: bool) -> None:
        self.quick = quick
        if quick:
            self.records = {100: 200_000, 1024: 60_000}
            self.cap_s, self.latency_s, self.warmup_s = 2.0, 3.0, 0.5
            self.group_cap_s, self.start_repeats, self.loopback_s = 10.0, 1, 1
            self.budget_s = 240.0
        else:
            self.records = {100: 1_000_000, 1024: 300_000}
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


def bench_broker(spec: brokers.BrokerSpec, cfg: Config, run_deadline: float) -> dict:
    res: dict = {"key": spec.key, "title": spec.title, "storage": spec.storage, "error": None,
                 "start": None, "rss": {}, "throughput": {}, "latency": None, "group": None}
    res["loadavg_1m_at_start"] = round(os.getloadavg()[0], 2)
    if spec.unavailable:
        res["error"] = spec.unavailable
        return res
    samples = []
    proc = None
    for i in range(cfg.start_repeats):
        try:
            proc = brokers.BrokerProcess(spec)
        except (RuntimeError, OSError) as exc:
            res["error"] = f"cannot start: {exc}"
            return res
        samples.append({"accept_s": proc.accept_s, "api_s": proc.api_s})
        if i < cfg.start_repeats - 1:
            proc.stop()
    res["start"] = {"accept_s": statistics.median(s["accept_s"] for s in samples),
                    "api_s": statistics.median(s["api_s"] for s in samples), "samples": samples}
    log(f"  started: accept {res['start']['accept_s'] * 1000:.1f} ms, ApiVersions "
        f"{res['start']['api_s'] * 1000:.1f} ms (median of {len(samples)}); pid {proc.pid}, {proc.bootstrap}")
    bootstrap = proc.bootstrap
    run_id = uuid.uuid4().hex[:6]

    def attempt(name: str, fn):
        if not proc.alive():
            return {"na": f"broker exited (status {proc.proc.returncode}) before this workload"}
        if time.monotonic() > run_deadline:
            return {"na": "skipped: the run's time budget was used up"}
        try:
            return fn()
        except Exception as exc:  # any client or broker failure becomes an n/a cell
            out = {"na": short(exc)}
            if not proc.alive():
                out["na"] += f" (broker exited, status {proc.proc.returncode})"
            return out

    try:
        time.sleep(1.0)
        res["rss"]["idle"] = brokers.rss_bytes(proc.pid)
        sampler = brokers.RssSampler(proc.pid)
        stored = 0
        for size in SIZES:
            for partitions in PARTITIONS:
                topics = {acks: f"bench-{run_id}-{size}b-p{partitions}-acks{acks}" for acks in ACKS}
                made = {}
                for acks, topic in topics.items():
                    made[acks] = attempt("create", lambda t=topic: create_topic(bootstrap, t, partitions))
                for acks in ACKS:
                    key = tp_key("produce", size, partitions, acks)
                    if made[acks] and "na" in made[acks]:
                        r = {"na": f"create topic with {partitions} partitions: {made[acks]['na']}"}
                    else:
                        r = attempt(key, lambda a=acks: rates(produce(bootstrap, topics[a], size,
                                                                      cfg.records[size], cfg.cap_s, a), size))
                    r.setdefault("target", cfg.records[size])
                    res["throughput"][key] = r
                    stored += r.get("records", 0) * size
                    log(f"  {key}: " + (r["na"] if "na" in r else f"{r['msgs_per_s']:,.0f} msg/s"))
                    if acks == "1":  # read back what was just produced
                        ckey = tp_key("consume", size, partitions)
                        if "na" in r or not r.get("records"):
                            c = {"na": "nothing was produced to read"}
                        else:
                            c = attempt(ckey, lambda n=r["records"]: rates(
                                consume(bootstrap, topics["1"], size, n, cfg.cap_s, partitions), size))
                            c.setdefault("target", r["records"])
                        res["throughput"][ckey] = c
                        log(f"  {ckey}: " + (c["na"] if "na" in c else f"{c['msgs_per_s']:,.0f} msg/s"))
        res["rss"]["peak_load"] = sampler.stop()
        time.sleep(2.0)
        res["rss"]["after_load"] = brokers.rss_bytes(proc.pid)
        res["rss"]["stored_payload_bytes"] = stored
        res["rss"]["data_dir_bytes"] = proc.stored_bytes()

        lat_topic = f"bench-{run_id}-latency"
        made = attempt("create", lambda: create_topic(bootstrap, lat_topic, 1))
        cpu0, t_cpu = brokers.cpu_seconds(proc.pid), time.perf_counter()
        res["latency"] = made if made and "na" in made else attempt(
            "latency", lambda: latency(bootstrap, lat_topic, LATENCY_RATE, cfg.latency_s, cfg.warmup_s))
        lat = res["latency"]
        if "na" not in lat and lat["send_rate"] < 0.95 * LATENCY_RATE:
            lat["note"] = (f"the paced producer only reached {lat['send_rate']:,.0f} msg/s "
                           f"(machine too busy?)")
        cpu1 = brokers.cpu_seconds(proc.pid)
        if "na" not in lat and cpu0 is not None and cpu1 is not None:
            lat["broker_cpu_pct"] = (cpu1 - cpu0) / (time.perf_counter() - t_cpu) * 100
        log("  latency: " + (lat["na"] if "na" in lat else
                             f"p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, p99.9 {lat['p999_ms']} ms"))

        grp_topic = f"bench-{run_id}-group"
        made = attempt("create", lambda: create_topic(bootstrap, grp_topic, 1))
        res["group"] = made if made and "na" in made else attempt(
            "group", lambda: group_first_record(bootstrap, grp_topic, cfg.group_cap_s))
        log(f"  group: {res['group']}")
        if not proc.alive():
            res["exited"] = proc.proc.returncode
    finally:
        if not proc.alive():
            res["log_tail"] = proc.log_tail(1500)
        code = proc.stop()
        res["exit_status"] = code
    return res


# --------------------------------------------------------------------------------------------------
# Report


class Notes:
    def __init__(self) -> None:
        self.items: list[str] = []

    def ref(self, text: str) -> str:
        if text not in self.items:
            self.items.append(text)
        return f"[{self.items.index(text) + 1}]"


def fmt_ratio(value, best) -> str:
    if value is None or best is None or best == 0:
        return "–"
    return f"{value / best:.2f}×"


def best_peer(values: dict, peers: list[str], higher_better: bool):
    got = [values[k] for k in peers if values.get(k) is not None]
    if not got:
        return None
    return max(got) if higher_better else min(got)


def render(info: dict, cfg: Config, results: list[dict], loop: dict, wall_s: float) -> str:
    notes = Notes()
    keys = [r["key"] for r in results]
    titles = {r["key"]: r["title"] for r in results}
    peers = [r["key"] for r in results if r.get("is_peer")]
    ours = [r["key"] for r in results if not r.get("is_peer")]
    by = {r["key"]: r for r in results}
    ref_bw = loop.get("reference_bytes_per_s")
    out = []
    w = out.append
    w(f"# odradek side by side{' (--quick)' if cfg.quick else ''}\n")
    w(f"- date: {info['date']}; wall time {wall_s / 60:.1f} min; load average (1 min) at start "
      f"{info['loadavg_1m']}")
    w(f"- machine: {info['nproc']} cores, {info['platform']}, Python {info['python']}")
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
    w("- brokers (each started alone, on 127.0.0.1, in this order; one stopped before the next starts):")
    for r in results:
        load = f" (load average when its turn began: {r['loadavg_1m_at_start']})" if r.get("loadavg_1m_at_start") else ""
        w(f"  - **{r['title']}**: {r['storage']}{load}" + (f" — **n/a: {r['error']}**" if r["error"] else ""))
    w("")

    def cell_error(r: dict, what: str) -> str | None:
        if r["error"]:
            return "n/a " + notes.ref(r["title"] + ": " + r["error"])
        return None

    head = "| workload | " + " | ".join(titles[k] for k in keys) + " | " + " | ".join(
        f"{titles[k]} ÷ best peer" for k in ours) + " |"
    sep = "|---|" + "---:|" * (len(keys) + len(ours))

    # Throughput
    w("## Throughput\n")
    w("msgs/s, payload MB/s (10^6 B/s) and that as a % of loopback bandwidth. Ratios: odradek ÷ best peer "
      "on msgs/s, above 1 = odradek faster. † = hit the time cap (rate over what was done in time).\n")
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
            t = r["throughput"].get(key)
            if t is None:
                cells.append("–")
                continue
            if "na" in t:
                cells.append("n/a " + notes.ref(f"{r['title']}, {key}: {t['na']}"))
                continue
            if not t.get("records"):
                why = t.get("first_error") or f"no record within the {t['seconds']:.0f} s cap"
                if t.get("client_log"):
                    why += f"; librdkafka logged: {t['client_log']}"
                cells.append("n/a " + notes.ref(f"{r['title']}, {key}: 0 of {t.get('target', 0):,} records: {why}"))
                continue
            values[k] = t["msgs_per_s"]
            pct = f" ({t['mb_per_s'] * 1e6 / ref_bw * 100:.1f}%)" if ref_bw else ""
            mark = " †" if t.get("capped") else ""
            extra = ""
            if t.get("failed") or t.get("first_error"):
                extra = " " + notes.ref(f"{r['title']}, {key}: {t.get('failed', 0)} failed; "
                                        f"first error: {t.get('first_error')}")
            elif t.get("capped") and t.get("client_log"):
                extra = " " + notes.ref(f"{r['title']}, {key}: librdkafka logged: {t['client_log']}")
            cells.append(f"{t['msgs_per_s']:,.0f}/s, {t['mb_per_s']:,.1f} MB/s{pct}{mark}{extra}")
        best = best_peer(values, peers, True)
        ratios = [fmt_ratio(values.get(k), best) for k in ours]
        w(f"| {key} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    w("")

    # Everything else
    w("## Latency, start-up, consumer group, memory\n")
    w("Lower is better for every row here; ratios = odradek ÷ best (lowest) peer, below 1 = odradek better.\n")
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
        w(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(fmt_ratio(values.get(k), best) for k in ours) + " |")

    def start_get(field):
        return lambda r: ((r["start"][field], None) if r.get("start") else (None, "not measured"))

    n = cfg.start_repeats
    row(f"start → first accepted TCP connection (ms, median of {n})", start_get("accept_s"),
        lambda v: f"{v * 1000:.1f}")
    row(f"start → first ApiVersions response (ms, median of {n})", start_get("api_s"),
        lambda v: f"{v * 1000:.1f}")

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
    row("broker RSS peak during the throughput workloads (MB)", rss_get("peak_load"), mb)
    stored = max((r["rss"].get("stored_payload_bytes") or 0) for r in results) / 1e9
    row(f"broker RSS 2 s after the throughput workloads, ~{stored:.1f} GB payload stored (MB)",
        rss_get("after_load"), mb)
    w("")
    w("† hit the time cap. Loopback %: payload MB/s ÷ loopback bandwidth (one TCP stream; Kafka framing "
      "and the client's own work are extra).")
    if any(by[k]["error"] is None and by[k]["rss"].get("data_dir_bytes") is not None for k in keys):
        sizes = ", ".join(f"{titles[k]} {by[k]['rss']['data_dir_bytes'] / 1e9:.2f} GB" for k in keys
                          if by[k]["error"] is None and by[k]["rss"].get("data_dir_bytes") is not None)
        w(f"Data directory size after the throughput workloads: {sizes}.")
    if notes.items:
        w("\n### Notes\n")
        for i, text in enumerate(notes.items, 1):
            w(f"{i}. " + text.replace("|", "/").replace("\n", " "))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~2 minutes: fewer records, shorter caps")
    parser.add_argument("--only", metavar="KEYS",
                        help="comma-separated subset of: odradek-disk, odradek-shm, tansu, noida")
    parser.add_argument("--from-json", metavar="FILE",
                        help="only re-render the report from a latest.json written earlier")
    parser.add_argument("--out-dir", default=os.path.join(brokers.BENCH, "results"),
                        help="where latest.md and latest.json go (default bench/results)")
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json) as fh:
            saved = json.load(fh)
        print(render(saved["machine"], Config(saved["quick"]), saved["brokers"], saved["loopback"], saved["wall_s"]))
        return 0
    cfg = Config(args.quick)
    t0 = time.monotonic()
    run_deadline = t0 + cfg.budget_s
    info = machine()

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
    if args.only:
        wanted = {k.strip() for k in args.only.split(",")}
        specs = [s for s in specs if s.key in wanted]
    results = []
    for spec in specs:
        log(f"== {spec.title} ({time.monotonic() - t0:.0f} s into the run)")
        try:
            r = bench_broker(spec, cfg, run_deadline)
        except Exception as exc:  # belt and braces: one broker never takes the run down
            r = {"key": spec.key, "title": spec.title, "storage": spec.storage, "error": short(exc),
                 "start": None, "rss": {}, "throughput": {}, "latency": None, "group": None}
        r["is_peer"] = spec.is_peer
        results.append(r)
    wall = time.monotonic() - t0
    report = render(info, cfg, results, loop, wall)
    print(report)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "latest.md"), "w") as fh:
        fh.write(report)
    with open(os.path.join(args.out_dir, "latest.json"), "w") as fh:
        json.dump({"machine": info, "quick": cfg.quick, "wall_s": wall, "loopback": loop,
                   "peers": {k: v for k, v in peers.items()}, "brokers": results}, fh, indent=2, default=str)
    log(f"wrote {os.path.join(args.out_dir, 'latest.md')} and latest.json; wall time {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
