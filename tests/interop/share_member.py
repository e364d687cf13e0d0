"""A confluent-kafka `ShareConsumer` (explicit acknowledgement) run as a subprocess, so that a test can SIGKILL it
while it holds acquired records.

Usage: python share_member.py BOOTSTRAP TOPIC GROUP ACCEPT [RELEASE]

Polls until one poll returns records, accepts those with offset < ACCEPT, releases those with offset in
[ACCEPT, RELEASE) (commit_sync) and keeps the others acquired: in explicit mode it may not poll again before acknowledging them, so it just waits to be killed.
Prints flushed lines: `MSG partition offset delivery_count` per record, `ACKED n` once the accepted ones (n of
them) and released ones are acknowledged, `ERROR text`. Exits after 120 s at the latest.
"""

import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer


def main() -> None:
    bootstrap, topic, group, accept = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    release = int(sys.argv[5]) if len(sys.argv) > 5 else accept
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "broker.address.family": "v4",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 120
    batch = []
    while not batch and time.monotonic() < deadline - 60:
        batch = [m for m in consumer.poll(0.5) if not m.error() or print(f"ERROR {m.error()}", flush=True)]
    for msg in batch:
        print(f"MSG {msg.partition()} {msg.offset()} {msg.delivery_count()}", flush=True)
    accepted = [m for m in batch if m.offset() < accept]
    released = [m for m in batch if accept <= m.offset() < release]
    for msg in accepted:
        consumer.acknowledge(msg)
    for msg in released:
        consumer.acknowledge(msg, AcknowledgeType.RELEASE)
    if accepted or released:
        consumer.commit_sync(30)
    print(f"ACKED {len(accepted)}", flush=True)
    time.sleep(max(0.0, deadline - time.monotonic()))


if __name__ == "__main__":
    main()
