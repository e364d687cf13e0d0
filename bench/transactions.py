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

import sys

from workloads import compare_producer_variants

# (label, producer config, records per transaction; None = idempotent, no transactions)
VARIANTS = [
    ("idempotent, no transactions", {"enable.idempotence": True}, None),
    ("transactions of 100", {"enable.idempotence": True}, 100),
    ("transactions of 10,000", {"enable.idempotence": True}, 10_000),
]


def main() -> int:
    return compare_producer_variants(__doc__, "transactional vs idempotent", "mode", "", "bench-txn", VARIANTS,
                                     records=100_000)


if __name__ == "__main__":
    sys.exit(main())
