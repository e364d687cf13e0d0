"""A confluent-kafka member of a KIP-848 group (`group.protocol=consumer`), run as a subprocess so that a test can
SIGKILL it (no leave heartbeat: only the session timeout removes it).

Usage: python consumer_protocol_member.py BOOTSTRAP TOPIC GROUP COMMIT_LIMIT [key=value ...]

Reads every record of its assignment from the group's committed offsets (the earliest without one) and, after each
batch, commits synchronously what it read, but never past offset COMMIT_LIMIT of a partition (-1: no limit). So a
test knows where the next owner of a partition must resume: at COMMIT_LIMIT, though this member read further.
More consumer properties as key=value. Prints one line per event, flushed:
`MEMBER id`, `ASSIGNED t:p,t:p` (the whole assignment after each change), `MSG partition offset`,
`COMMITTED p=offset,p=offset`, `ERROR text`. Exits after 120 s at the latest.
"""

import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def main() -> None:
    bootstrap, topic, group, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "broker.address.family": "v4", "enable.auto.commit": False}
    for kv in sys.argv[5:]:
        k, _, v = kv.partition("=")
        config[k] = v
    consumer = Consumer(config)

    def show(c, parts):  # in the callback, the assignment does not have `parts` yet
        now = {(p.topic, p.partition) for p in c.assignment()} | {(p.topic, p.partition) for p in parts}
        print("ASSIGNED " + ",".join(sorted(f"{t}:{p}" for t, p in now)), flush=True)

    def revoked(c, parts):
        gone = {(p.topic, p.partition) for p in parts}
        print("ASSIGNED " + ",".join(sorted(f"{p.topic}:{p.partition}" for p in c.assignment()
                                            if (p.topic, p.partition) not in gone)), flush=True)

    consumer.subscribe([topic], on_assign=show, on_revoke=revoked, on_lost=revoked)
    member = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        msgs = consumer.consume(100, 0.2)
        if consumer.memberid() and consumer.memberid() != member:
            member = consumer.memberid()
            print(f"MEMBER {member}", flush=True)
        nxt: dict[int, int] = {}
        for m in msgs:
            if m.error():
                print(f"ERROR {m.error()}", flush=True)
                continue
            print(f"MSG {m.partition()} {m.offset()}", flush=True)
            nxt[m.partition()] = m.offset() + 1
        if limit >= 0:
            nxt = {p: min(o, limit) for p, o in nxt.items()}
        if nxt:
            try:
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in nxt.items()], asynchronous=False)
                print("COMMITTED " + ",".join(f"{p}={o}" for p, o in sorted(nxt.items())), flush=True)
            except KafkaException as exc:
                print(f"ERROR commit {exc}", flush=True)
    consumer.close()


if __name__ == "__main__":
    main()
