"""Share groups (KIP-932 queues) against a classic consumer group, and redelivery after a lock timeout.

    .venv/bin/python bench/share_groups.py [--records 30000] [--consumers 3] [--lock-ms 3000] [--rounds 3]
    .venv/bin/python bench/share_groups.py --quick      # one round

Starts one odradek broker (its own temp directory, `group.share.record.lock.duration.ms` = --lock-ms) and
measures, with confluent-kafka (librdkafka's share consumer):

1. Throughput: `--records` records of 1 KiB (acks=all, untimed) in a topic of as many partitions as there
   are consumers. A classic group of `--consumers` Consumers (subscribe, auto.offset.reset=earliest,
   auto-commit on) reads them; then a share group of as many ShareConsumers in explicit acknowledgement
   mode, each accepting every record it gets (`acknowledge(msg)`; the acknowledgements ride on its next
   poll, and a commit_sync at the end). One thread per consumer in this process (every client call
   releases the GIL). Timed from the first record any consumer received until every record was received
   (the group's join before it is reported apart: a classic group's rebalances as members arrive make it
   longer; with much fewer records than the default, a classic member prefetches most of the topic during
   that join and the rate means little); the share figure also counts records received twice (a redelivery during the run would show
   there).
2. Redelivery after a lock timeout, per round a topic of its own: consumer A (explicit mode) gets 10
   records and never acknowledges them (it stays a member: it does not poll or close); consumer B joins
   and polls. The latency is the time from the records' lock expiry (A's poll return + --lock-ms) until B
   has all 10. B joins while the locks still run; a round where B joined later says so.

Every wait is bounded. Writes bench/results/share_groups.md and .json (the directory is not in git).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from workloads import OwnBroker, create_topic, machine, produce

RECORD_BYTES = 1024
REDELIVERED = 10
CAP_S = 120.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def share_group_from_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for `group` (a GROUP config, KIP-932): without it a share group
    starts at the partitions' ends and would see none of the records already there."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def run_members(target, count: int) -> list[dict]:
    """`target(index, result)` in `count` threads started together; their result dicts, once all ended."""
    results = [{} for _ in range(count)]
    threads = [threading.Thread(target=target, args=(i, results[i]), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(CAP_S + 60)
    return results


def classic_group(bootstrap: str, topic: str, records: int, consumers: int) -> dict:
    group = f"bench-classic-{uuid.uuid4().hex[:8]}"
    lock = threading.Lock()
    seen = {"n": 0}
    start = time.perf_counter()

    def member(_i: int, out: dict) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "fetch.wait.max.ms": 10})
        c.subscribe([topic])
        got = 0
        deadline = time.perf_counter() + CAP_S
        while time.perf_counter() < deadline:
            with lock:
                if seen["n"] >= records:
                    break
            batch = [m for m in c.consume(10_000, 0.2) if not m.error()]
            got += len(batch)
            with lock:
                if batch and "first" not in seen:
                    seen["first"] = time.perf_counter()
                seen["n"] += len(batch)
                if seen["n"] >= records and "end" not in seen:
                    seen["end"] = time.perf_counter()
        out["records"] = got
        c.close()

    results = run_members(member, consumers)
    return {"records": seen["n"], **_timing(start, seen), "per_member": [r.get("records", 0) for r in results]}


def _timing(start: float, marks: dict) -> dict:
    """seconds: first record to the last one; join_s: the consumers' start to the first record."""
    first, end = marks.get("first"), marks.get("end")
    return {"seconds": None if end is None else end - first, "join_s": None if first is None else first - start}


def share_group(bootstrap: str, topic: str, records: int, consumers: int) -> dict:
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    share_group_from_earliest(bootstrap, group)
    lock = threading.Lock()
    delivered: dict[tuple[int, int], int] = {}
    state: dict = {}
    start = time.perf_counter()

    def member(_i: int, out: dict) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "share.acknowledgement.mode": "explicit"})
        c.subscribe([topic])
        got = 0
        deadline = time.perf_counter() + CAP_S
        try:
            while time.perf_counter() < deadline:
                with lock:
                    if len(delivered) >= records:
                        break
                batch = [m for m in c.poll(0.2) if not m.error()]
                for m in batch:
                    c.acknowledge(m)
                got += len(batch)
                with lock:
                    if batch and "first" not in state:
                        state["first"] = time.perf_counter()
                    for m in batch:
                        key = (m.partition(), m.offset())
                        delivered[key] = delivered.get(key, 0) + 1
                    if len(delivered) >= records and "end" not in state:
                        state["end"] = time.perf_counter()
            c.commit_sync(30)
        finally:
            c.close()
        out["records"] = got

    results = run_members(member, consumers)
    return {"records": len(delivered), **_timing(start, state),
            "twice": sum(1 for n in delivered.values() if n > 1),
            "per_member": [r.get("records", 0) for r in results]}


def redelivery_round(bootstrap: str, lock_ms: int) -> dict:
    """One topic, one group: A holds REDELIVERED records without acknowledging; B gets them after the lock."""
    topic = f"bench-redeliver-{uuid.uuid4().hex[:8]}"
    group = f"bench-redeliver-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, RECORD_BYTES, REDELIVERED, 30, "all")
    share_group_from_earliest(bootstrap, group)
    config = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    a = ShareConsumer(config)
    a.subscribe([topic])
    held: set[int] = set()
    deadline = time.perf_counter() + 60
    while len(held) < REDELIVERED and time.perf_counter() < deadline:
        batch = [m for m in a.poll(0.5) if not m.error()]
        held.update(m.offset() for m in batch)
        if batch:
            acquired = time.perf_counter()
            break
    else:
        a.close()
        raise RuntimeError(f"consumer A got {len(held)} of {REDELIVERED} records in 60 s")
    # A got the whole batch in one poll (one ShareFetch answer): its lock started at the broker before
    # `acquired`, so the latency below is an upper bound by the fetch's return trip.
    expiry = acquired + lock_ms / 1000
    b = ShareConsumer({**config, "share.acknowledgement.mode": "implicit"})
    b.subscribe([topic])
    b_joined = None
    got: set[int] = set()
    deadline = time.perf_counter() + lock_ms / 1000 + 60
    try:
        while not held <= got and time.perf_counter() < deadline:
            batch = [m for m in b.poll(0.05) if not m.error()]
            if b_joined is None:
                b_joined = time.perf_counter()  # its first poll returned: group joined, first fetch answered
            got.update(m.offset() for m in batch)
        seen = time.perf_counter()
    finally:
        b.close()
        a.close()
    if not held <= got:
        raise RuntimeError(f"consumer B got {len(got & held)} of the {len(held)} held records")
    return {"records": len(held), "latency_s": seen - expiry, "b_ready_before_expiry": b_joined < expiry}


def run(records: int = 30_000, consumers: int = 3, lock_ms: int = 3000, rounds: int = 3) -> dict:
    part = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "loadavg_1m_at_start": os.getloadavg()[0], "records": records,
            "record_bytes": RECORD_BYTES, "consumers": consumers, "lock_ms": lock_ms,
            "throughput": [], "redelivery": []}
    broker = OwnBroker({"group.share.record.lock.duration.ms": str(lock_ms)})
    try:
        bootstrap = broker.address
        for i in range(rounds):
            topic = f"bench-share-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, consumers)
            produce(bootstrap, topic, RECORD_BYTES, records, CAP_S, "all")
            log(f"round {i + 1}: classic group")
            classic = classic_group(bootstrap, topic, records, consumers)
            log(f"round {i + 1}: share group")
            share = share_group(bootstrap, topic, records, consumers)
            part["throughput"].append({"classic": classic, "share": share})
            log(f"round {i + 1}: redelivery")
            part["redelivery"].append(redelivery_round(bootstrap, lock_ms))
    finally:
        broker.stop()
    return part


def _rate(result: dict) -> float | None:
    return None if not result["seconds"] else result["records"] / result["seconds"]


def _cell(values: list[float | None], fmt: str) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    text = fmt.format(statistics.median(known))
    return text if len(known) == 1 else f"{text} [{fmt.format(min(known))}–{fmt.format(max(known))}]"


def render(part: dict) -> str:
    rows = part["throughput"]
    classic = [_rate(r["classic"]) for r in rows]
    share = [_rate(r["share"]) for r in rows]
    ratio = [s / c if s and c else None for s, c in zip(share, classic)]
    mb = part["record_bytes"] / 1e6
    lat = [r["latency_s"] * 1000 for r in part["redelivery"]]
    late = sum(1 for r in part["redelivery"] if not r["b_ready_before_expiry"])
    out = [f"## Share groups (bench/share_groups.py, {part['when']})", "",
           f"{part['records']:,} records of {part['record_bytes']} B, {part['consumers']} consumers in one process "
           f"(threads), {len(rows)} rounds (median [range]); lock duration {part['lock_ms']} ms; "
           f"load average at start {part['loadavg_1m_at_start']:.2f}.", "",
           "| | records/s | MB/s |", "|---|---|---|",
           f"| classic group ({part['consumers']} Consumers) | {_cell(classic, '{:,.0f}')} | "
           f"{_cell([c and c * mb for c in classic], '{:.1f}')} |",
           f"| share group ({part['consumers']} ShareConsumers, explicit accept of every record) | "
           f"{_cell(share, '{:,.0f}')} | {_cell([s and s * mb for s in share], '{:.1f}')} |",
           f"| share ÷ classic | {_cell(ratio, '{:.2f}')} | |", "",
           f"Subscribe to first record: classic {_cell([r['classic']['join_s'] for r in rows], '{:.2f}')} s, share "
           f"{_cell([r['share']['join_s'] for r in rows], '{:.2f}')} s (not in the rates).", "",
           f"Records a share group received twice: {sum(r['share']['twice'] for r in rows)}. Redelivery after the "
           f"lock timeout (lock expiry to the second consumer holding all {REDELIVERED} records): "
           f"{_cell(lat, '{:.1f}')} ms over {len(lat)} rounds"
           + (f" ({late} rounds where B joined after the expiry)" if late else "") + "."]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--lock-ms", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    part = run(args.records, args.consumers, args.lock_ms, args.rounds)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "share_groups.json"), "w") as f:
        json.dump(part, f, indent=1)
    text = render(part)
    with open(os.path.join(args.out_dir, "share_groups.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
