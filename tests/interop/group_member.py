"""A confluent-kafka group member run as a subprocess (so a test can SIGKILL it without a LeaveGroup).

Usage: python group_member.py BOOTSTRAP TOPIC GROUP [key=value ...]   (extra consumer properties)
Prints one line per event, flushed: `ASSIGNED t:p,t:p`, `MSG partition offset`, `ERROR text`.
Exits after 120 s at the latest.
"""

import sys
import time

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "broker.address.family": "v4", "session.timeout.ms": 6000, "enable.auto.commit": False}
    for kv in sys.argv[4:]:
        k, _, v = kv.partition("=")
        config[k] = v
    consumer = Consumer(config)

    def assigned(c, parts):
        print("ASSIGNED " + ",".join(f"{p.topic}:{p.partition}" for p in parts), flush=True)

    def revoked(c, parts):
        print("ASSIGNED ", flush=True)

    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for m in consumer.consume(100, 0.2):
            if m.error():
                print(f"ERROR {m.error()}", flush=True)
            else:
                print(f"MSG {m.partition()} {m.offset()}", flush=True)
    consumer.close()


if __name__ == "__main__":
    main()
