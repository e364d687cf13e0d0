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

import sys

from workloads import compare_producer_variants

# librdkafka caps an idempotent producer at 5 requests in flight, so the third variant isolates the
# broker's cost from the client's shallower pipeline.
VARIANTS = [
    ("off", {"enable.idempotence": False}, None),
    ("on (5 in flight)", {"enable.idempotence": True}, None),
    ("off, 5 in flight", {"enable.idempotence": False, "max.in.flight.requests.per.connection": 5}, None),
]


def main() -> int:
    return compare_producer_variants(__doc__, "idempotence off vs on", "idempotence", "idempotence ", "bench-idem",
                                     VARIANTS, records=200_000)


if __name__ == "__main__":
    sys.exit(main())
