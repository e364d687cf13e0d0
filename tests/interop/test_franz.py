"""franz-go (kgo and kadm), the Go client, against odradek: records both ways with confluent-kafka, a
cooperative-sticky consumer group, GroupTransactSession transactions and admin.

The Go program is `tests/franz` (its own module); it is built once per session into a temporary directory,
downloading its modules through the Go module proxy on first use. Without `go` the tests skip, except under
CI (`CI` set) where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .helpers import assert_delivered, consume_messages, produce_messages, wait_until
from .test_groups_clients import committed_offsets

FRANZ_SRC = Path(__file__).resolve().parents[1] / "franz"
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 60  # each run's own deadline (-timeout); the process gets 15 s more
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # kgo's batch attribute codes


def find_go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    default = Path("/usr/local/go/bin/go")  # the official tarball's place, often not on PATH
    return str(default) if default.is_file() else None


class Franz:
    def __init__(self, binary: Path, bootstrap: str) -> None:
        self.binary, self.bootstrap = binary, bootstrap

    def run(self, command: str, *args: Any, timeout: float = RUN_TIMEOUT_S) -> list[dict]:
        """Run a subcommand; its JSON lines, parsed. A non-zero exit fails the test with its stderr."""
        argv = [str(self.binary), command, "-brokers", self.bootstrap, "-timeout", f"{timeout}s",
                *[str(a) for a in args]]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 15)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"franz {command} did not end within {timeout + 15}s; stderr: {e.stderr!r}")
        if proc.returncode != 0:
            pytest.fail(f"franz {' '.join(argv[1:])} exited {proc.returncode}\n--- stderr ---\n{proc.stderr[-4000:]}"
                        f"\n--- stdout (tail) ---\n{proc.stdout[-2000:]}")
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def admin(self, op: str, *args: Any) -> list[dict]:
        return self.run("admin", "-op", op, *args)


@pytest.fixture(scope="session")
def franz_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = find_go()
    if go is None:
        if os.environ.get("CI"):
            pytest.fail("franz-go interop must run in CI: go not found")
        pytest.skip("go not found (tests/franz needs Go 1.26)")
    binary = tmp_path_factory.mktemp("franz") / "franz"
    env = dict(os.environ, GOFLAGS="-mod=mod")
    try:
        proc = subprocess.run([go, "build", "-o", str(binary), "."], cwd=FRANZ_SRC, env=env, capture_output=True,
                              text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"go build of tests/franz took over {BUILD_TIMEOUT_S}s")
    if proc.returncode != 0:
        pytest.fail(f"go build of tests/franz failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return binary


@pytest.fixture
def franz(franz_binary: Path, broker) -> Franz:
    return Franz(franz_binary, broker.bootstrap)


def franz_value(prefix: str, i: int) -> str:
    """Mirror of value() in tests/franz/records.go: the values `franz produce` writes."""
    return f"{prefix}-value-{i}-" + "abc" * (i % 20)


def create(franz: Franz, topic: str, partitions: int, *more: str) -> None:
    result = franz.admin("create", "-topics", ",".join((topic, *more)), "-partitions", partitions)
    assert [r["err"] for r in result] == [""] * (1 + len(more)), result


# ---------------------------------------------------------------------------------------------------
# Records both ways


@pytest.mark.parametrize("codec", list(CODECS))
def test_franz_produces_confluent_consumes(franz, broker, topic_name, codec):
    n, partitions = 60, 2
    create(franz, topic_name, partitions)
    acks = franz.run("produce", "-topic", topic_name, "-n", n, "-partitions", partitions, "-compression", codec,
                     "-prefix", codec)
    assert len(acks) == n
    where = {(a["p"], a["o"]): i for i, a in enumerate(acks)}
    for p in range(partitions):  # each partition's records in produce order, offsets from 0
        assert sorted(o for (q, o) in where if q == p) == list(range(n // partitions))
        msgs = consume_messages(broker.bootstrap, topic_name, n // partitions, partition=p, extra_wait=0.3)
        assert len(msgs) == n // partitions
        for m in msgs:
            i = where[(p, m.offset())]
            assert i % partitions == p
            assert m.key() == (None if i % 5 == 4 else f"k-{i}".encode())
            assert m.value() == franz_value(codec, i).encode()
            assert m.headers() == [("i", str(i).encode()), ("client", b"franz")]
    # the batches are stored as franz-go sent them: compressed with the codec, idempotent (kgo's default)
    stored = franz.run("consume", "-topic", topic_name, "-n", n, "-extra", "0.3s")
    records, tail = stored[:-1], stored[-1]
    assert tail == {"count": n}
    assert {r["codec"] for r in records} == {CODECS[codec]}
    assert all(r["pid"] >= 0 for r in records)


def test_confluent_produces_franz_consumes(franz, broker, topic_name):
    n, partitions = 60, 3
    create(franz, topic_name, partitions)
    specs = [{"value": f"cf-{i}".encode() * (1 + i % 7), "key": None if i % 4 == 3 else f"key-{i}".encode(),
              "partition": i % partitions, "headers": [("n", str(i).encode()), ("empty", b"")]} for i in range(n)]
    msgs = assert_delivered(produce_messages(broker.bootstrap, topic_name, specs,
                                             config={"enable.idempotence": True, "compression.type": "zstd",
                                                     "linger.ms": 20}))
    sent = {(m.partition(), m.offset()): i for i, m in enumerate(msgs)}
    got = franz.run("consume", "-topic", topic_name, "-n", n, "-extra", "0.5s")
    records, tail = got[:-1], got[-1]
    assert tail == {"count": n}
    assert sorted((r["p"], r["o"]) for r in records) == sorted(sent)
    for r in records:
        spec = specs[sent[(r["p"], r["o"])]]
        assert r["v"].encode() == spec["value"]
        assert (r["k"] if r["k"] is None else r["k"].encode()) == spec["key"]
        assert [(k, v.encode()) for k, v in r["h"]] == spec["headers"]
        assert r["codec"] == CODECS["zstd"] and r["pid"] >= 0 and not r.get("control")


def test_franz_bench_subcommands(franz, topic_name):
    """bench/native.py's client: a flat-out produce (acks=1 and acks=all) and a consume of what it wrote."""
    create(franz, topic_name, 1)
    for acks in ("1", "all"):
        (p,) = franz.run("bench", "-mode", "produce", "-topic", topic_name, "-n", 5000, "-size", 1024, "-acks", acks)
        assert (p["records"], p["bytes"], p["failures"], p["capped"]) == (5000, 5000 * 1024, 0, False), p
    (c,) = franz.run("bench", "-mode", "consume", "-topic", topic_name, "-n", 10000, "-size", 1024)
    assert (c["records"], c["bytes"], c["failures"], c["capped"]) == (10000, 10000 * 1024, 0, False), c
    assert c["mb_per_s"] > 0


# ---------------------------------------------------------------------------------------------------
# Consumer group, cooperative-sticky


def test_franz_cooperative_group_split_leave_takeover(franz, broker, topic_name):
    partitions, n = 4, 40
    create(franz, topic_name, partitions)
    group = f"g-{topic_name}"
    events = franz.run("group", "-topic", topic_name, "-group", group, "-partitions", partitions, "-n", n)
    split, rebalanced, *recs = events
    assert split["event"] == "split" and rebalanced["event"] == "rebalanced"
    a_first, b_parts = set(split["a"]), set(split["b"])
    assert len(a_first) == len(b_parts) == partitions // 2  # sticky: an even split
    assert a_first | b_parts == set(range(partitions))
    # both in, on the cooperative protocol: a gave up only what b got, never its own partitions
    assert (split["state"], split["protocol"], split["members"]) == ("Stable", "cooperative-sticky", 2)
    assert split["a_revoked"] == [sorted(b_parts)]
    assert rebalanced["a"] == list(range(partitions))  # b left: a took over its partitions
    assert rebalanced["a_revoked"] == [sorted(b_parts)]
    by_member = {e["member"]: e["records"] for e in recs}
    assert set(by_member) == {"a", "b"}
    # b read only its own partitions and only phase one; a phase one on its own partitions, then all
    assert all(p in b_parts and v.startswith("one-") for p, _, v in by_member["b"])
    assert all(p in a_first for p, _, v in by_member["a"] if v.startswith("one-"))
    every = by_member["a"] + by_member["b"]
    values = sorted(v for _, _, v in every)
    assert values == sorted([f"one-{i}" for i in range(n)] + [f"two-{i}" for i in range(n)])  # once each
    for p in range(partitions):  # each partition read in order, no gap, no repeat
        offsets = [o for q, o, _ in by_member["b"] + by_member["a"] if q == p]
        assert offsets == list(range(2 * n // partitions)), (p, offsets)
    per_partition = 2 * n // partitions
    assert committed_offsets(broker.bootstrap, group, topic_name, partitions) == dict.fromkeys(range(partitions),
                                                                                            per_partition)
    listed = franz.admin("groups", "-group", group)
    assert {"group": group, "state": "Empty", "protocol_type": "consumer"} in listed
    described = {"group": group, "state": "Empty", "protocol_type": "consumer", "members": 0, "err": ""}
    assert {"describe": described} in listed
    assert {"offsets": {topic_name: {str(p): per_partition for p in range(partitions)}}} in listed


# ---------------------------------------------------------------------------------------------------
# Transactions: GroupTransactSession


def test_franz_group_transact_session(franz, broker, topic_name):
    partitions, n = 2, 40
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"g-{topic_name}"
    create(franz, source, partitions, sink)
    specs = [{"value": f"in-{i}".encode(), "key": f"k{i}".encode(), "partition": i % partitions} for i in range(n)]
    assert_delivered(produce_messages(broker.bootstrap, source, specs))
    lines = franz.run("transact", "-in", source, "-out", sink, "-group", group, "-txn-id", f"tx-{topic_name}",
                      "-n", n, "-abort", 1)
    *txns, totals = lines
    assert totals == {"committed_records": n, "aborted_txns": 1}
    assert txns[0]["committed"] is False and txns[-1]["committed"] is True
    aborted = sum(t["records"] for t in txns if not t["committed"])
    assert sum(t["records"] for t in txns if t["committed"]) == n
    per_partition = n // partitions
    for p in range(partitions):
        expected = [f"out:in-{i}".encode() for i in range(p, n, partitions)]
        committed = consume_messages(broker.bootstrap, sink, per_partition, partition=p, extra_wait=1.0,
                                     config={"isolation.level": "read_committed"})
        assert [m.value() for m in committed] == expected  # exactly once, in order; nothing aborted
        assert [m.key() for m in committed] == [f"k{i}".encode() for i in range(p, n, partitions)]
    # the aborted transaction's records are in the log, only invisible to read_committed
    everything = franz.run("consume", "-topic", sink, "-n", n + aborted, "-extra", "0.5s")
    assert everything[-1] == {"count": n + aborted}
    copies = Counter(r["v"] for r in everything[:-1])
    assert set(copies) == {f"out:in-{i}" for i in range(n)} and set(copies.values()) <= {1, 2}
    visible = franz.run("consume", "-topic", sink, "-n", n, "-extra", "0.5s", "-read-committed")
    assert visible[-1] == {"count": n}
    assert sorted(r["v"] for r in visible[:-1]) == sorted(f"out:in-{i}" for i in range(n))
    assert committed_offsets(broker.bootstrap, group, source, partitions) == dict.fromkeys(range(partitions),
                                                                                         per_partition)


# ---------------------------------------------------------------------------------------------------
# Admin: kadm


def test_franz_admin(franz, broker, topic_name):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource

    a, b = f"{topic_name}-a", f"{topic_name}-b"
    assert franz.admin("create", "-topics", f"{a},{b}", "-partitions", 3, "-config", "retention.ms=3600000") == [
        {"topic": a, "err": "", "partitions": 3}, {"topic": b, "err": "", "partitions": 3}]
    (again,) = franz.admin("create", "-topics", a, "-partitions", 3)
    assert "TOPIC_ALREADY_EXISTS" in again["err"]
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    listed = confluent.list_topics(timeout=15).topics
    assert len(listed[a].partitions) == len(listed[b].partitions) == 3
    assert {r["topic"]: r["partitions"] for r in franz.admin("list")}.items() >= {a: 3, b: 3}.items()
    described = franz.admin("describe", "-topics", f"{a},{b}")
    assert [(d["topic"], d["err"], d["replicas"]) for d in described] == [
        (t, "", {"0": [0], "1": [0], "2": [0]}) for t in (a, b)]

    (configs,) = franz.admin("configs", "-topics", a)
    assert configs["configs"]["retention.ms"] == "3600000"
    assert configs["configs"]["cleanup.policy"] == "delete"
    assert franz.admin("alter", "-topics", a, "-config", "retention.ms=7200000") == [{"topic": a, "err": ""}]
    (configs,) = franz.admin("configs", "-topics", a)
    assert configs["configs"]["retention.ms"] == "7200000"
    resource = ConfigResource("topic", a)
    seen = confluent.describe_configs([resource])[resource].result(15)
    assert seen["retention.ms"].value == "7200000"

    # a group with committed offsets (confluent-kafka commits them) and end offsets
    specs = [{"value": b"x", "partition": i % 3} for i in range(9)]
    assert_delivered(produce_messages(broker.bootstrap, a, specs))
    assert {(r["partition"], r["offset"]) for r in franz.admin("end-offsets", "-topics", a)} == {(0, 3), (1, 3), (2, 3)}
    group = f"g-{topic_name}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "broker.address.family": "v4"})
    try:
        c.commit(offsets=[TopicPartition(a, 0, 2), TopicPartition(a, 2, 3)], asynchronous=False)
    finally:
        c.close()
    groups = franz.admin("groups", "-group", group)
    assert any(g.get("group") == group for g in groups)
    assert {"offsets": {a: {"0": 2, "2": 3}}} in groups

    assert franz.admin("delete", "-topics", f"{a},{b}") == [{"topic": a, "err": ""}, {"topic": b, "err": ""}]
    wait_until(lambda: not {a, b} & set(confluent.list_topics(timeout=5).topics), timeout=15,
               message="deleted topics gone from metadata")
    assert not {a, b} & {r["topic"] for r in franz.admin("list")}
