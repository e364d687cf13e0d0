"""A consume-transform-produce worker (confluent-kafka) for tests/interop/test_transactions.py.

    python txn_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID TOTAL

Reads INPUT in consumer group GROUP (read_committed, static membership so a restarted worker takes over at
once), writes "out-<value>" for every record to OUTPUT, and commits the consumed offsets in the same
transaction (send_offsets_to_transaction). Exits 0 once the group's position covers TOTAL input records.
Meant to be killed with SIGKILL at any point and started again: the output must still hold every input
exactly once for a read_committed reader.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def main() -> int:
    boot, src, dst, group, txn_id, total = sys.argv[1:7]
    total = int(total)
    consumer = Consumer({
        "bootstrap.servers": boot, "broker.address.family": "v4", "group.id": group,
        "group.instance.id": f"{group}-worker", "session.timeout.ms": 6000,
        "isolation.level": "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    producer = Producer({"bootstrap.servers": boot, "broker.address.family": "v4", "transactional.id": txn_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(60)
    consumer.subscribe([src])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        msgs = consumer.consume(num_messages=20, timeout=0.5)
        msgs = [m for m in msgs if m.error() is None]
        if msgs:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(dst, value=b"out-" + m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            time.sleep(0.1)  # keep the run long enough for the test to kill it mid-way
        assignment = consumer.assignment()
        if assignment:
            try:
                committed = consumer.committed(assignment, timeout=10)
            except KafkaException:
                continue
            if sum(max(tp.offset, 0) for tp in committed) >= total:
                consumer.close()
                return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
