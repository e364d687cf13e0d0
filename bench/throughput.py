"""Throughput benchmark for odradek, driven by a real Kafka client (confluent-kafka / librdkafka).

Usage:  .venv/bin/python bench/throughput.py [--quick] [--bootstrap HOST:PORT] [--json out.json]

Without --bootstrap it starts its own broker (`python -m odradek serve`) on a free loopback port with
a temporary data directory (disk log, default flush policy), times spawn-to-ready, and stops it with
SIGTERM at the end. For each record size (100 B and 1 KiB) on a fresh single-partition topic it measures:

  produce acks=1    Producer(acks=1, linger.ms=5, batch.size=1 MB, no compression): produce() + poll(0)
                    as fast as possible, retrying on BufferError, then flush(); only delivered records count.
  consume           Consumer by assign() from offset 0 of the acks=1 topic until every delivered record
                    has been read and checked (small fetch.min.bytes / fetch.wait.max.ms, large fetch sizes).
  produce acks=all  As produce acks=1, into a second topic, with acks=all.

Each workload is capped both in records and in wall time (20 s; --quick divides both by 5). A capped
workload reports what it managed in the time. MB/s is payload bytes / s with 1 MB = 10^6 B.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid

from confluent_kafka import KafkaException

# The workload code lives in workloads.py (shared with compare.py); these names stay importable from
# here for the other bench scripts.
from workloads import OwnBroker, consume, create_topic, machine, make_payload, produce, rates, size_label  # noqa: F401

SIZES = (100, 1024)
FULL_RECORDS = {100: 2_000_000, 1024: 500_000}
FULL_TIME_CAP_S = 20.0
QUICK_FACTOR = 5


def run(bootstrap: str, quick: bool) -> list[dict]:
    cap_s = FULL_TIME_CAP_S / QUICK_FACTOR if quick else FULL_TIME_CAP_S
    run_id = uuid.uuid4().hex[:8]
    rows = []
    for size in SIZES:
        count = FULL_RECORDS[size] // QUICK_FACTOR if quick else FULL_RECORDS[size]
        label = size_label(size)
        topic = {acks: f"bench-{run_id}-{size}b-acks{acks}" for acks in ("1", "all")}
        for name in topic.values():
            create_topic(bootstrap, name)
        for workload in (f"produce {label} acks=1", f"consume {label}", f"produce {label} acks=all"):
            if workload.startswith("consume"):  # read back exactly what the acks=1 run delivered
                target = rows[-1]["records"]
                result = consume(bootstrap, topic["1"], size, target, cap_s)
            else:
                acks = workload.rsplit("=", 1)[1]
                target = count
                result = produce(bootstrap, topic[acks], size, count, cap_s, acks)
            result.update(workload=workload, record_size=size, target=target)
            rates(result, size)
            secs = result["seconds"]
            rows.append(result)
            print(f"  {workload}: {result['records']:,} records in {secs:.2f} s", file=sys.stderr)
    return rows


def print_report(info: dict, rows: list[dict], ready_s: float | None, quick: bool) -> None:
    print(f"# odradek throughput{' (--quick)' if quick else ''}\n")
    print(f"- date: {info['date']}\n- nproc: {info['nproc']}\n- python: {info['python']} ({info['platform']})")
    print(f"- client: confluent-kafka {info['confluent_kafka']} / librdkafka {info['librdkafka']}")
    print(f"- broker: {info['broker']}\n")
    print("| workload | records | seconds | msgs/s | MB/s |\n|---|---:|---:|---:|---:|")
    if ready_s is not None:
        print(f"| broker start-to-ready | – | {ready_s:.3f} | – | – |")
    for r in rows:
        records = f"{r['records']:,}" + (f" of {r['target']:,} (time cap)" if r["capped"] else "")
        print(f"| {r['workload']} | {records} | {r['seconds']:.2f} | {r['msgs_per_s']:,.0f} | {r['mb_per_s']:.2f} |")
    for r in rows:
        if r["failed"] or r["first_error"]:
            print(f"\n! {r['workload']}: {r['failed']} failed, first error: {r['first_error']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~5x fewer records and less time per workload")
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="use a running broker instead of starting one")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()
    info = machine()
    broker = None
    ready_s = None
    if args.bootstrap:
        bootstrap = args.bootstrap
        info["broker"] = f"external at {bootstrap}"
    else:
        broker = OwnBroker()
        bootstrap, ready_s = broker.address, broker.ready_s
        info["broker"] = "own subprocess, temp data dir, default flush policy"
    try:
        rows = run(bootstrap, args.quick)
    except KafkaException as exc:
        if broker is not None:
            print(f"broker log tail:\n{broker.log_tail()}", file=sys.stderr)
        raise SystemExit(f"benchmark failed: {exc}")
    finally:
        code = broker.stop() if broker is not None else None
    if code not in (None, 0):
        print(f"warning: broker exited with status {code} after SIGTERM", file=sys.stderr)
    print_report(info, rows, ready_s, args.quick)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "quick": args.quick, "broker_ready_s": ready_s, "results": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
