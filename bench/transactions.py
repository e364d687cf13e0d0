"""What transactions cost: confluent-kafka produce throughput, transactional vs idempotent.

Usage:  .venv/bin/python bench/transactions.py [--quick] [--rounds N] [--bootstrap HOST:PORT]

Without --bootstrap it starts its own broker (as bench/throughput.py does). Each run produces 1 KiB records
(acks=all, linger.ms=5, batch.size=1 MB, no compression) into a fresh single-partition topic: with
idempotence only (no transactions), and transactionally with 100 and with 10,000 records per transaction
(begin, produce, commit; each commit costs the coordinator three fsynced `__transaction_state` writes and
one marker). It prints msgs/s and MB/s (1 MB = 10^6 payload bytes) side by side. Each run is capped in
records (100,000) and wall time (15 s); --quick divides both by 5. Only records whose delivery report
succeeded (and, when transactional, whose transaction committed) count.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

from confluent_kafka import Producer

from throughput import OwnBroker, create_topic, make_payload

SIZE = 1024
RECORDS = 100_000
CAP_S = 15.0
QUICK_FACTOR = 5
VARIANTS = [None, 100, 10_000]  # records per transaction; None = idempotent, no transactions


def produce(bootstrap: str, topic: str, count: int, cap_s: float, per_txn: int | None, run_id: str) -> dict:
    config = {
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
        "compression.type": "none", "enable.idempotence": True, "queue.buffering.max.messages": 500_000,
        "message.timeout.ms": int(cap_s * 1000) + 30_000}
    if per_txn is not None:
        config["transactional.id"] = f"bench-{run_id}-{topic}"
    producer = Producer(config)
    payload = make_payload(SIZE)
    state = {"delivered": 0, "failed": 0, "first_error": None}

    def on_delivery(err, _msg) -> None:
        if err is None:
            state["delivered"] += 1
        else:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or str(err)

    if per_txn is not None:
        producer.init_transactions(30)
    producer.list_topics(topic, timeout=10)
    start = time.perf_counter()
    deadline = start + cap_s
    sent = committed = transactions = 0
    while sent < count and time.perf_counter() < deadline:
        batch = min(per_txn or count, count - sent)
        if per_txn is not None:
            producer.begin_transaction()
        i = 0
        while i < batch:
            try:
                producer.produce(topic, payload, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.001)
                continue
            producer.poll(0)
        sent += batch
        if per_txn is not None:
            producer.commit_transaction(max(5.0, deadline - time.perf_counter() + 30))
            committed += batch
            transactions += 1
    producer.flush(max(0.0, deadline - time.perf_counter() + 30))
    elapsed = time.perf_counter() - start
    n = state["delivered"] if per_txn is None else min(committed, state["delivered"])
    return {"label": "idempotent, no transactions" if per_txn is None else f"transactions of {per_txn:,}",
            "records": n, "target": count, "seconds": elapsed, "transactions": transactions,
            "msgs_per_s": n / elapsed if elapsed > 0 else 0.0,
            "mb_per_s": n * SIZE / elapsed / 1e6 if elapsed > 0 else 0.0,
            "failed": state["failed"], "first_error": state["first_error"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bootstrap", metavar="HOST:PORT")
    args = parser.parse_args()
    count = RECORDS // QUICK_FACTOR if args.quick else RECORDS
    cap_s = CAP_S / QUICK_FACTOR if args.quick else CAP_S
    broker = None if args.bootstrap else OwnBroker()
    bootstrap = args.bootstrap or broker.address
    rows = []
    try:
        run_id = uuid.uuid4().hex[:8]
        for r in range(max(1, min(args.rounds, 10))):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for v, per_txn in enumerate(order):
                topic = f"bench-txn-{run_id}-{r}-{v}"
                create_topic(bootstrap, topic)
                rows.append(produce(bootstrap, topic, count, cap_s, per_txn, run_id))
                print(f"  round {r} {rows[-1]['label']}: {rows[-1]['records']:,} records in "
                      f"{rows[-1]['seconds']:.2f} s", file=sys.stderr)
    finally:
        if broker is not None:
            broker.stop()
    print(f"# odradek produce 1 KiB acks=all, transactional vs idempotent{' (--quick)' if args.quick else ''}\n")
    print("| mode | records | transactions | seconds | msgs/s | MB/s |\n|---|---:|---:|---:|---:|---:|")
    for row in rows:
        capped = f" of {row['target']:,} (time cap)" if row["records"] < row["target"] else ""
        print(f"| {row['label']} | {row['records']:,}{capped} | {row['transactions']:,} | {row['seconds']:.2f} "
              f"| {row['msgs_per_s']:,.0f} | {row['mb_per_s']:.2f} |")
    print()
    for name in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == name]
        total = sum(r["records"] for r in mine)
        secs = sum(r["seconds"] for r in mine)
        if secs:
            print(f"{name}: {total / secs:,.0f} msgs/s, {total * SIZE / secs / 1e6:.1f} MB/s (all rounds)")
    failed = [r for r in rows if r["failed"]]
    for r in failed:
        print(f"\n! {r['label']}: {r['failed']} failed, first: {r['first_error']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
