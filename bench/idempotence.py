"""What idempotence costs: confluent-kafka produce throughput with enable.idempotence off vs on.

Usage:  .venv/bin/python bench/idempotence.py [--quick] [--rounds N] [--bootstrap HOST:PORT]

Without --bootstrap it starts its own broker (as bench/throughput.py does). Each round produces 1 KiB
records (acks=all, linger.ms=5, batch.size=1 MB, no compression) into a fresh single-partition topic, once
with idempotence off, on, and off with 5 requests in flight (librdkafka's cap for an idempotent producer,
so that row separates the broker's cost from the client's shallower pipeline); the order alternates
between rounds. It prints msgs/s and MB/s
(1 MB = 10^6 payload bytes). Each run is capped in records (200,000) and wall time (15 s); --quick divides
both by 5. Only records whose delivery report succeeded count.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

from confluent_kafka import Producer

from throughput import OwnBroker, create_topic, make_payload

SIZE = 1024
RECORDS = 200_000
CAP_S = 15.0
QUICK_FACTOR = 5


def produce(bootstrap: str, topic: str, count: int, cap_s: float, idempotent: bool, in_flight: int | None) -> dict:
    config = {
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
        "compression.type": "none", "enable.idempotence": idempotent,
        "queue.buffering.max.messages": 500_000, "message.timeout.ms": int(cap_s * 1000) + 30_000}
    if in_flight is not None:
        config["max.in.flight.requests.per.connection"] = in_flight
    producer = Producer(config)
    payload = make_payload(SIZE)
    state = {"delivered": 0, "failed": 0, "first_error": None}

    def on_delivery(err, _msg) -> None:
        if err is None:
            state["delivered"] += 1
        else:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or str(err)

    producer.list_topics(topic, timeout=10)  # connect (and, when idempotent, get a producer id) first
    start = time.perf_counter()
    deadline = start + cap_s
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        try:
            producer.produce(topic, payload, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.001)
            continue
        producer.poll(0)
    producer.flush(max(0.0, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - start
    if len(producer):
        producer.purge()
        producer.flush(5)
    n = state["delivered"]
    return {"idempotent": idempotent, "label": label(idempotent, in_flight), "records": n, "target": count,
            "seconds": elapsed,
            "msgs_per_s": n / elapsed if elapsed > 0 else 0.0,
            "mb_per_s": n * SIZE / elapsed / 1e6 if elapsed > 0 else 0.0,
            "failed": state["failed"], "first_error": state["first_error"]}


def label(idempotent: bool, in_flight: int | None) -> str:
    if idempotent:
        return "on (5 in flight)"
    return "off" if in_flight is None else f"off, {in_flight} in flight"


# (idempotence, max.in.flight): librdkafka caps an idempotent producer at 5 requests in flight, so the
# third variant isolates the broker's cost from the client's shallower pipeline.
VARIANTS = [(False, None), (True, None), (False, 5)]


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
            for v, (idempotent, in_flight) in enumerate(order):
                topic = f"bench-idem-{run_id}-{r}-{v}"
                create_topic(bootstrap, topic)
                rows.append(produce(bootstrap, topic, count, cap_s, idempotent, in_flight))
                print(f"  round {r} idempotence {rows[-1]['label']}: "
                      f"{rows[-1]['records']:,} records in {rows[-1]['seconds']:.2f} s", file=sys.stderr)
    finally:
        if broker is not None:
            broker.stop()
    print(f"# odradek produce 1 KiB acks=all, idempotence off vs on{' (--quick)' if args.quick else ''}\n")
    print("| idempotence | records | seconds | msgs/s | MB/s |\n|---|---:|---:|---:|---:|")
    for row in rows:
        capped = f" of {row['target']:,} (time cap)" if row["records"] < row["target"] else ""
        print(f"| {row['label']} | {row['records']:,}{capped} | {row['seconds']:.2f} "
              f"| {row['msgs_per_s']:,.0f} | {row['mb_per_s']:.2f} |")
    print()
    for idempotent, in_flight in VARIANTS:
        name = label(idempotent, in_flight)
        mine = [r for r in rows if r["label"] == name]
        total = sum(r["records"] for r in mine)
        secs = sum(r["seconds"] for r in mine)
        if secs:
            print(f"idempotence {name}: {total / secs:,.0f} msgs/s, {total * SIZE / secs / 1e6:.1f} MB/s (all rounds)")
    failed = [r for r in rows if r["failed"]]
    for r in failed:
        print(f"\n! idempotence {r['label']}: {r['failed']} failed, first: {r['first_error']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
