"""Interop tests: the official Java client 4.x (kafka-clients 4.4, from `make reference`) against odradek.

The `java4_client` fixture (conftest.py) compiles `java/OdradekClient.java` against the kafka-clients jar of
the reference install; without the install these tests skip, except under CI (tests/reference's rule). Its
runs fail when the client logs an unsupported version or an ERROR (the fixture checks stderr), so every test
here also checks that the 4.x client and odradek agree on API versions. Where a harness command is new here
and cheap, a test runs it with the 3.9 client (`java_client`) too.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.reference.differential import Connection

from .conftest import JavaClient
from .helpers import assert_delivered, consume_messages, java_value, produce_messages, wait_until
from .test_groups_clients import committed_offsets
from .test_groups_confluent import create_topic

BASE_TS = 1_730_000_000_000


def admin_lines(client: JavaClient, bootstrap: str, *steps: str) -> list[list[str]]:
    return [line.split("\t") for line in client.run("admin", bootstrap, *steps)]


# ----------------------------------------------------------------------------------- produce / consume


@pytest.mark.timeout(120)
def test_java4_produce_consume_keys_headers_codecs(broker, topic_name, java4_client):
    """librdkafka writes a snappy and an lz4 batch, the 4.x producer zstd batches, all to one partition; the
    4.x consumer reads every record back exactly (keys, values, headers, timestamps), and librdkafka reads
    what the 4.x producer wrote."""
    n_ck, n = 20, 60
    recs = [{"key": f"ck-{i}".encode(), "value": f"cv-{i}".encode() * (1 + i % 7), "partition": 0,
             "headers": [("n", str(i).encode()), ("codec", codec.encode())], "timestamp": BASE_TS + i}
            for codec, part in (("snappy", range(0, n_ck // 2)), ("lz4", range(n_ck // 2, n_ck))) for i in part]
    for codec, part in (("snappy", recs[:n_ck // 2]), ("lz4", recs[n_ck // 2:])):
        sent = assert_delivered(produce_messages(broker.bootstrap, topic_name, part,
                                                 config={"compression.type": codec, "linger.ms": 50}))
        assert [m.offset() for m in sent] == list(range(sent[0].offset(), sent[0].offset() + len(part)))

    prefix = "j4-zstd-"
    assert java4_client.produce(broker.bootstrap, topic_name, n, compression="zstd", prefix=prefix) == \
        list(range(n_ck, n_ck + n))

    got = java4_client.consume(broker.bootstrap, topic_name, n_ck + n)
    assert [r["offset"] for r in got] == list(range(n_ck + n))
    assert [(r["key"], r["value"], r["timestamp"], r["headers"]) for r in got[:n_ck]] == [
        (r["key"].decode(), r["value"].decode(), r["timestamp"],
         ",".join(f"{k}={v.decode()}" for k, v in r["headers"])) for r in recs]
    assert [(r["key"], r["value"], r["headers"]) for r in got[n_ck:]] == [
        (f"key-{i}", java_value(prefix, i), f"idx={i}") for i in range(n)]
    assert all(r["timestamp"] > BASE_TS for r in got[n_ck:])  # the producer's clock: create time, now

    cgot = consume_messages(broker.bootstrap, topic_name, n, offset=n_ck, only_fatal=True)
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in cgot] == [
        (n_ck + i, f"key-{i}".encode(), java_value(prefix, i).encode(), [("idx", str(i).encode())])
        for i in range(n)]
    assert [m.timestamp()[1] for m in cgot] == [r["timestamp"] for r in got[n_ck:]]


# ---------------------------------------------------------------------------------------------- admin


@pytest.mark.timeout(120)
def test_admin_topics_configs_offsets_cluster(broker, topic_name, any_java_client):
    """Admin: create a topic with configs, list, describe, describe configs, list offsets, describe the
    cluster, create it again (an error), delete it, delete it again (an error); one Admin client."""
    t = topic_name
    lines = admin_lines(any_java_client, broker.bootstrap,
                        f"create={t}:3:retention.ms=3600000,cleanup.policy=compact", "topics", f"describe={t}",
                        f"configs={t}:retention.ms,cleanup.policy,max.message.bytes", f"create={t}:1",
                        f"ends={t}", "cluster", f"delete={t}", "topics", f"delete={t}")
    by_kind: dict[str, list[list[str]]] = {}
    for line in lines:
        by_kind.setdefault(line[0], []).append(line[1:])

    # CreateTopics answers with the topic's partitions, replication factor and configs
    assert by_kind["created"] == [[t, "3", "1", "cleanup.policy=compact,retention.ms=3600000"]]
    cluster_id, controller, nodes = by_kind["cluster"][0]
    assert cluster_id and nodes == controller  # one broker, its own controller
    node = controller
    assert by_kind["partition"] == [[t, str(p), node, node, node] for p in range(3)]
    assert by_kind["config"] == [
        [t, "retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG", "false"],
        [t, "cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG", "false"],
        [t, "max.message.bytes", "1048588", "DEFAULT_CONFIG", "false"],
    ]
    assert by_kind["end"] == [[t, str(p), "0", "0"] for p in range(3)]
    assert by_kind["error"] == [["create", "TopicExistsException"], ["delete", "UnknownTopicOrPartitionException"]]
    assert by_kind["deleted"] == [[t]]
    # the topic is listed between its creation and its deletion, and not after: "topics" ran twice
    first_listing = lines.index(["partition", t, "0", node, node, node])
    listed = [i for i, line in enumerate(lines) if line == ["topic", t]]
    assert len(listed) == 1 and listed[0] < first_listing


# -------------------------------------------------------------------------------------- consumer group


@dataclass
class Member:
    """A `group-member` harness process and what its output says so far."""

    proc: subprocess.Popen
    out: Path
    err: Path
    assigned: set[int] = field(default_factory=set)
    assignments: int = 0
    drained: bool = False
    records: list[tuple[int, int, str]] = field(default_factory=list)

    def refresh(self, running: bool = True) -> "Member":
        """Re-read the output; with `running`, a member that has exited is an error."""
        self.assigned, self.assignments, self.drained, self.records = set(), 0, False, []
        # only complete lines: the member may be writing one right now
        for line in self.out.read_text().split("\n")[:-1]:
            kind, _, rest = line.partition("\t")
            if kind == "assigned":
                self.assigned = {int(p) for p in rest.split(",") if p}
                self.assignments += 1
                self.drained = False
            elif kind == "drained":
                self.drained = {int(p) for p in rest.split(",") if p} == self.assigned
            elif kind == "record":
                p, off, value = rest.split("\t", 2)
                self.records.append((int(p), int(off), value))
                self.drained = False
        if running and self.proc.poll() is not None:
            raise AssertionError(f"group member exited {self.proc.returncode}: {self.err.read_text()[-3000:]}")
        return self


def produce_spread_java(client: JavaClient, bootstrap: str, topic: str, n: int, partitions: int,
                        prefix: str) -> dict[tuple[int, int], str]:
    """The 4.x producer with its defaults (idempotent); returns (partition, offset) -> value."""
    lines = client.run("produce-default", bootstrap, topic, n, partitions, prefix)
    placed = [tuple(int(x) for x in line.split("\t")) for line in lines]
    assert [p for p, _ in placed] == [i % partitions for i in range(n)]
    return {(p, off): java_value(prefix, i) for i, (p, off) in enumerate(placed)}


@pytest.mark.timeout(180)
def test_java4_two_consumers_split_partitions_and_commit(broker, topic_name, java4_client, tmp_path):
    """Two 4.x consumers (classic protocol) in one group split four partitions 2 + 2, each reads only its
    own (also what arrives while both are members), every record is read exactly once, and the offsets they
    commit are the end offsets; Admin lists and describes the group meanwhile."""
    t, group, parts = topic_name, f"g-{topic_name}", 4
    # the first wave through librdkafka (no JVM to start); the second, while both are members, through 4.x
    create_topic(broker.bootstrap, t, parts)
    sent = assert_delivered(produce_messages(broker.bootstrap, t, [
        {"value": f"w1-{i}".encode(), "partition": i % parts} for i in range(40)]))
    expected = {(m.partition(), m.offset()): m.value().decode() for m in sent}

    stop = tmp_path / "stop"
    args = ("group-member", broker.bootstrap, t, group, stop, 120000)
    members = []
    try:
        for name in ("a", "b"):
            out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
            with open(out, "w") as o, open(err, "w") as e:
                proc = subprocess.Popen(java4_client.command(args), stdout=o, stderr=e, text=True)
            members.append(Member(proc, out, err))
        a, b = members

        def split_and_drained() -> bool:
            a.refresh()
            b.refresh()
            return (a.drained and b.drained and len(a.assigned) == len(b.assigned) == parts // 2
                    and a.assigned | b.assigned == set(range(parts)))

        wait_until(split_and_drained, timeout=60, interval=0.2, message="two members with 2 partitions each")
        assignments = (a.assignments, b.assignments)

        more = produce_spread_java(java4_client, broker.bootstrap, t, 40, parts, "w2-")
        expected.update(more)

        def second_wave_read() -> bool:
            a.refresh()
            b.refresh()
            seen = {(p, off) for m in (a, b) for p, off, _ in m.records}
            return a.drained and b.drained and set(more) <= seen

        wait_until(second_wave_read, timeout=60, interval=0.2, message="the second wave read by both members")
        assert (a.assignments, b.assignments) == assignments  # no rebalance meanwhile
        for m in (a, b):  # while both are members, each reads only its own partitions
            assert {p for p, off, _ in m.records if (p, off) in more} == m.assigned

        described = admin_lines(java4_client, broker.bootstrap, "groups", f"group={group}")
        assert ["group", group, "consumer"] in described
        state = [line for line in described if line[0] == "group-state"]
        assert state == [["group-state", group, "Stable", "range", "2"]]
        member_parts = sorted(line[3] for line in described if line[0] == "member")
        assert member_parts == sorted(",".join(f"{t}-{p}" for p in sorted(m.assigned)) for m in (a, b))

        stop.touch()
        for m in members:
            assert m.proc.wait(timeout=60) == 0, m.err.read_text()[-3000:]
            java4_client.check_log(args, m.err.read_text())
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait()

    read = [rec for m in members for rec in m.refresh(running=False).records]
    assert sorted((p, off) for p, off, _ in read) == sorted(expected)  # each exactly once
    assert {(p, off): v for p, off, v in read} == expected

    # then the empty group's offsets, the topic's end offsets, and the group deleted (twice: an error)
    after = admin_lines(java4_client, broker.bootstrap, f"offsets={group}", f"ends={t}", f"group={group}",
                        f"delete-group={group}", f"delete-group={group}", "groups")
    assert [line for line in after if line[0] == "offset"] == [["offset", group, t, str(p), "20"] for p in range(parts)]
    assert [line for line in after if line[0] == "end"] == [["end", t, str(p), "0", "20"] for p in range(parts)]
    assert [line for line in after if line[0] == "group-state"] == [["group-state", group, "Empty", "", "0"]]
    assert [line for line in after if line[0] in ("deleted-group", "error")] == [
        ["deleted-group", group], ["error", "delete-group", "GroupIdNotFoundException"]]
    assert ["group", group, "consumer"] not in after


# --------------------------------------------------------------------------------------- transactions


@pytest.mark.timeout(120)
def test_java4_transactions_abort_invisible_commit_visible(broker, topic_name, java4_client):
    """One 4.x transactional producer aborts, commits, aborts, commits; a 4.x read_committed consumer sees
    only the committed records, at their offsets between the transactions' markers. The producer speaks
    transactions v2: every end bumped its epoch."""
    t, n = topic_name, 4
    out = java4_client.run("produce-txn", broker.bootstrap, t, n, "abort,commit,abort,commit", f"{t}-tx", "x")
    # each transaction: n records, then (not acked to the producer, but taking an offset) its marker
    expected_out: list[str] = []
    for k, outcome in enumerate(["aborted", "committed", "aborted", "committed"]):
        expected_out += [str(k * (n + 1) + j) for j in range(n)] + [outcome]
    assert out == expected_out
    committed = [(n + 1 + j, n + j) for j in range(n)] + [(3 * (n + 1) + j, 3 * n + j) for j in range(n)]

    got = java4_client.consume(broker.bootstrap, t, len(committed), isolation="read_committed")
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (offset, f"key-{i}", java_value("x", i)) for offset, i in committed]
    # read_uncommitted (librdkafka) sees the aborted records too, but no markers
    every = consume_messages(broker.bootstrap, t, 4 * n, config={"isolation.level": "read_uncommitted"})
    assert [(m.offset(), m.value().decode()) for m in every] == [
        (k * (n + 1) + j, java_value("x", k * n + j)) for k in range(4) for j in range(n)]
    # transactions v2 (KIP-890): odradek finalizes transaction.version 2, so the 4.x producer ended each
    # transaction with EndTxn v5 and its epoch bump, and added its partition by producing (Produce v12)
    conn = Connection(broker.bootstrap)
    try:
        state = conn.request(65, 0, {"transactional_ids": [f"{t}-tx"]})["transaction_states"][0]
    finally:
        conn.close()
    assert (state["error_code"], state["transaction_state"], state["producer_epoch"]) == (0, "CompleteCommit", 4)


@pytest.mark.timeout(150)
def test_consume_transform_produce_exactly_once(broker, topic_name, any_java_client):
    """consume-transform-produce with sendOffsetsToTransaction(offsets, consumer.groupMetadata()): the first
    transaction is aborted (its offsets are not committed either), the rest committed; the output holds each
    input record transformed exactly once, and the group's offset is the input's end."""
    t_in, t_out, group = f"{topic_name}-in", f"{topic_name}-out", f"g-{topic_name}"
    n = 30
    sent = assert_delivered(produce_messages(broker.bootstrap, t_in, [
        {"key": f"k-{i}".encode(), "value": f"v-{i}".encode(), "partition": 0} for i in range(n)]))
    assert [m.offset() for m in sent] == list(range(n))

    lines = [line.split("\t") for line in any_java_client.run(
        "ctp", broker.bootstrap, t_in, t_out, group, f"{topic_name}-tx", n, "true")]
    assert lines[0][:2] == ["txn", "abort"] and lines[1] == ["committed-after-abort", "0", "none"]
    aborted = int(lines[0][2])
    commits = [int(c) for kind, outcome, c in lines[2:] if kind == "txn" and outcome == "commit"]
    assert len(commits) == len(lines) - 2 and sum(commits) == n and 0 < aborted <= 10

    # the output's offsets: the aborted records and their marker, then each transaction's records and marker
    expected_offsets, offset = [], aborted + 1
    for c in commits:
        expected_offsets += range(offset, offset + c)
        offset += c + 1
    committed = consume_messages(broker.bootstrap, t_out, n, config={"isolation.level": "read_committed"},
                                 extra_wait=0.5)
    assert [(m.offset(), m.key(), m.value()) for m in committed] == [
        (o, f"k-{i}".encode(), f"t:v-{i}".encode()) for i, o in enumerate(expected_offsets)]
    uncommitted = consume_messages(broker.bootstrap, t_out, aborted + n, config={"isolation.level": "read_uncommitted"})
    assert [m.value() for m in uncommitted[:aborted]] == [f"t:v-{i}".encode() for i in range(aborted)]
    assert committed_offsets(broker.bootstrap, group, t_in, 1) == {0: n}


# ------------------------------------------------------------------------------------------ the log check


@pytest.mark.timeout(60)
def test_java4_log_reaches_stderr(java4_client, tmp_path):
    """The version check reads the 4.x client's log on stderr: prove the log gets there, with a warning
    that a client must log (no broker at the address), so the check is not vacuous."""
    config = tmp_path / "short.properties"
    config.write_text("default.api.timeout.ms=1500\nrequest.timeout.ms=1000\n")
    err = java4_client.run_failing("admin", f"127.0.0.1:{free_port()}", "cluster", client_config=config)
    assert any(line.startswith("WARN NetworkClient") and "could not be established" in line
               for line in err.splitlines()), err[-3000:]
    assert "TimeoutException" in err
