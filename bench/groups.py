"""Consumer-group latencies: a lone consumer's first message, and failover after a member is killed.

Usage:  .venv/bin/python bench/groups.py [--rounds N] [--bootstrap HOST:PORT]

Without --bootstrap it starts its own broker (as bench/throughput.py does). Two figures, each measured
with librdkafka's default session timeout (45 s) and with session.timeout.ms=6000:

* first message: a confluent-kafka consumer with a fresh group.id subscribes to a topic that already holds
  records; time from subscribe() to the first record returned by consume() (FindCoordinator, JoinGroup
  twice — MEMBER_ID_REQUIRED — the initial rebalance delay, SyncGroup, OffsetFetch, Fetch).
* settle after kill -9: three members (two in this process, one a subprocess) share a 6-partition topic;
  the subprocess is SIGKILLed (no LeaveGroup) and we time until the two survivors own all 6 partitions.
  This is dominated by the session timeout by design.

Every wait is bounded (60 s for a first message, session timeout + 60 s for a failover).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from throughput import OwnBroker

MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": int(sys.argv[4]),
              "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]], on_assign=lambda c, p: print("ASSIGNED", len(p), flush=True))
end = time.monotonic() + 300
while time.monotonic() < end:
    c.consume(100, 0.2)
"""


def topic_with_records(bootstrap: str, partitions: int) -> str:
    name = f"bench-groups-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(partitions * 10):
        p.produce(name, b"x", partition=i % partitions)
    p.flush(15)
    return name


def first_message(bootstrap: str, topic: str, session_ms: int | None) -> float:
    config = {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
              "auto.offset.reset": "earliest"}
    if session_ms:
        config["session.timeout.ms"] = session_ms
    c = Consumer(config)
    try:
        t0 = time.perf_counter()
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in c.consume(1, 0.05):
                if m.error() is None:
                    return time.perf_counter() - t0
        raise SystemExit("no message within 60 s")
    finally:
        c.close()


def settle_after_kill(bootstrap: str, topic: str, session_ms: int | None) -> float:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    session = session_ms or 45000
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "session.timeout.ms": session}
    proc = subprocess.Popen([sys.executable, "-c", MEMBER, bootstrap, group, topic, str(session)],
                            stdout=subprocess.PIPE, text=True)
    survivors = [Consumer(config) for _ in range(2)]
    try:
        for c in survivors:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while sorted(len(c.assignment()) for c in survivors) != [2, 2]:
            if time.monotonic() > deadline:
                raise SystemExit("the group never settled at 2/2/2")
            for c in survivors:
                c.consume(100, 0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        t0 = time.perf_counter()
        deadline = time.monotonic() + session / 1000 + 60
        while sorted(len(c.assignment()) for c in survivors) != [3, 3]:
            if time.monotonic() > deadline:
                raise SystemExit("the survivors never took over the dead member's partitions")
            for c in survivors:
                c.consume(100, 0.02)
        return time.perf_counter() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in survivors:
            c.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()
    broker = None if args.bootstrap else OwnBroker()
    bootstrap = args.bootstrap or broker.address
    try:
        for label, session in (("defaults (session 45 s)", None), ("session.timeout.ms=6000", 6000)):
            topic = topic_with_records(bootstrap, 6)
            firsts = [first_message(bootstrap, topic, session) for _ in range(args.rounds)]
            settle = [settle_after_kill(bootstrap, topic, session) for _ in range(max(1, args.rounds // 3))]
            print(f"{label:28s} first message: median {statistics.median(firsts) * 1000:7.0f} ms "
                  f"(min {min(firsts) * 1000:.0f}, max {max(firsts) * 1000:.0f})   "
                  f"settle after kill -9: {statistics.median(settle):6.1f} s", flush=True)
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
