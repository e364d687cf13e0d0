"""kafka-consumer-groups, kafka-transactions, kafka-leader-election, kafka-reassign-partitions and the
verifiable producer and consumer (Apache Kafka 4.4's own tools) against a three-broker odradek cluster and
against Kafka 4.4 in the same run: the same commands, the same exit codes and, normalised, the same output.

The per-broker commands name broker 2 on odradek (a follower of most partitions) and broker 1, the only one,
on the reference. Where odradek does something the single-node reference cannot (move replicas between
brokers, elect a leader that is not leading), that part is asserted on odradek alone.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.interop.helpers import wait_until

from .tools import assert_same, table

pytestmark = pytest.mark.timeout(240)


def bootstrap(side) -> list[str]:
    return ["--bootstrap-server", side.bootstrap]


def create(runner, sides, topic: str, partitions: int) -> None:
    assert_same(runner.run_both(sides, "kafka-topics", lambda s: [
        *bootstrap(s), "--create", "--topic", topic, "--partitions", str(partitions),
        "--replication-factor", str(s.replication)]), sides)


def produce(side, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": side.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, value=b"value-%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def consume_and_commit(side, topic: str, group: str, count: int) -> None:
    consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = 0
    try:
        deadline = time.monotonic() + 60
        while got < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == count, f"{side.name}: consumed {got} of {count}"
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_kafka_consumer_groups_describe_reset_delete(runner, sides):
    topic, group = "tools-groups", "tools-group"
    create(runner, sides, topic, 2)
    for side in sides:
        produce(side, topic, 10, 2)
        consume_and_commit(side, topic, group, 10)
    listed = assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [*bootstrap(s), "--list"]), sides)
    assert group in listed.splitlines()
    group_args = lambda s: [*bootstrap(s), "--group", group]
    described = assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [
        *group_args(s), "--describe"]), sides)
    rows = table("\n".join(line for line in described.splitlines() if not line.startswith("Consumer group")
                           ).replace(" ", "\t"))
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows] == \
        [("0", "5", "5", "0"), ("1", "5", "5", "0")], described
    assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [
        *group_args(s), "--describe", "--state"]), sides)
    # a dry run, then the reset itself, then a reset to an offset on one partition
    for extra in (["--to-earliest", "--dry-run"], ["--to-earliest", "--execute"], ["--to-offset", "3", "--execute"],
                  ["--shift-by", "1", "--execute"]):
        reset = assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [
            *group_args(s), "--reset-offsets", "--topic", f"{topic}:0" if "--to-offset" in extra else topic,
            *extra]), sides)
        assert "NEW-OFFSET" in reset
    described = assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [
        *group_args(s), "--describe", "--offsets"]), sides)
    rows = [line.split()[1:6] for line in described.splitlines()[1:]]  # after --to-offset 3 on 0, --shift-by 1
    assert rows == [[topic, "0", "4", "5", "1"], [topic, "1", "1", "5", "4"]], described
    assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [
        *group_args(s), "--delete-offsets", "--topic", f"{topic}:1"]), sides)
    assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [*group_args(s), "--delete"]), sides)
    assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [*group_args(s), "--describe"]), sides)
    assert_same(runner.run_both(sides, "kafka-consumer-groups", lambda s: [*group_args(s), "--delete"]), sides)


def test_kafka_transactions_list_describe_find_hanging(runner, sides, odradek_cluster):
    topic, txn = "tools-txn", "tools-txn-id"
    create(runner, sides, topic, 3)
    producers = {}
    for side in sides:  # a transaction left open on every partition
        producer = Producer({"bootstrap.servers": side.bootstrap, "transactional.id": txn,
                             "transaction.timeout.ms": 60000})
        producer.init_transactions(30)
        producer.begin_transaction()
        for p in range(3):
            producer.produce(topic, value=b"open", partition=p)
        assert producer.flush(30) == 0
        producers[side.name] = producer
    try:
        listed = runner.run_both(sides, "kafka-transactions", lambda s: [*bootstrap(s), "list"])
        assert {o.rc for o in listed.values()} == {0}, listed
        rows = {name: [(r["TransactionalId"], r["TransactionState"]) for r in table(o.out)]
                for name, o in listed.items()}
        assert rows["odradek"] == rows["kafka"] == [(txn, "Ongoing")], listed
        described = runner.run_both(sides, "kafka-transactions", lambda s: [
            *bootstrap(s), "describe", "--transactional-id", txn])
        assert {o.rc for o in described.values()} == {0}, described
        columns = ("TransactionalId", "TransactionState", "TransactionTimeoutMs", "ProducerEpoch")
        for name, o in described.items():
            (row,) = table(o.out)
            assert tuple(row[c] for c in columns) == (txn, "Ongoing", "60000", row["ProducerEpoch"]), o
            assert sorted(row["TopicPartitions"].split(",")) == [f"{topic}-{p}" for p in range(3)], o

        # describe-producers on a partition the named broker follows (odradek: broker 2 is a follower of
        # the partitions it does not lead): Kafka answers from any replica (issue 40, item 3)
        views = odradek_cluster.metadata()
        followed = next(p for p in range(3) if views.partition(topic, p).leader != 2)
        producers_out = runner.run_both(sides, "kafka-transactions", lambda s: [
            *bootstrap(s), "describe-producers", "--topic", topic, "--partition",
            str(followed if s.name == "odradek" else 0), "--broker-id", str(s.broker_id)])
        assert {o.rc for o in producers_out.values()} == {0}, producers_out
        for name, o in producers_out.items():
            (row,) = table(o.out)
            assert (row["ProducerEpoch"], row["LastSequence"], row["CurrentTransactionStartOffset"]) == \
                (row["ProducerEpoch"], "0", "0"), o
        # find-hanging asks the named broker about every partition it holds: a fresh open transaction
        # is not hanging, on either side
        hanging = assert_same(runner.run_both(sides, "kafka-transactions", lambda s: [
            *bootstrap(s), "find-hanging", "--broker-id", str(s.broker_id)]), sides)
        assert table(hanging.replace(" ", "\t")) == [], hanging
        assert_same(runner.run_both(sides, "kafka-transactions", lambda s: [
            *bootstrap(s), "find-hanging", "--broker-id", str(s.broker_id), "--topic", topic]), sides)
    finally:
        for producer in producers.values():
            producer.abort_transaction(30)
        producers.clear()  # librdkafka's producers go now, not at interpreter exit after the brokers
    described = runner.run_both(sides, "kafka-transactions", lambda s: [
        *bootstrap(s), "describe", "--transactional-id", txn])
    states = {name: table(o.out)[0]["TransactionState"] for name, o in described.items()}
    assert set(states.values()) <= {"CompleteAbort", "PrepareAbort"}, described
    assert_same(runner.run_both(sides, "kafka-transactions", lambda s: [
        *bootstrap(s), "describe", "--transactional-id", "no-such-transaction"]), sides)


def test_kafka_leader_election(runner, sides, odradek_cluster, tmp_path):
    topic = "tools-election"
    create(runner, sides, topic, 2)
    # balanced: nothing to elect, said alike for every partition and for one
    assert_same(runner.run_both(sides, "kafka-leader-election", lambda s: [
        *bootstrap(s), "--election-type", "preferred", "--all-topic-partitions"]), sides)
    assert_same(runner.run_both(sides, "kafka-leader-election", lambda s: [
        *bootstrap(s), "--election-type", "preferred", "--topic", topic, "--partition", "0"]), sides)
    assert_same(runner.run_both(sides, "kafka-leader-election", lambda s: [
        *bootstrap(s), "--election-type", "unclean", "--topic", topic, "--partition", "1"]), sides)
    assert_same(runner.run_both(sides, "kafka-leader-election", lambda s: [
        *bootstrap(s), "--election-type", "preferred", "--topic", "no-such-topic", "--partition", "0"]), sides)

    # odradek alone (one broker cannot have a leader other than its preferred one): put partition 0's
    # leader second in its replica list, then elect the new first one
    state = odradek_cluster.partition_state(topic, 0)
    leader = state.leader
    reordered = [b for b in state.replicas if b != leader] + [leader]
    plan = tmp_path / "reorder.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": reordered}]}))
    odradek = sides[0]
    out = runner.run("kafka-reassign-partitions", [*bootstrap(odradek), "--reassignment-json-file", str(plan),
                                                   "--execute"])
    assert out.rc == 0, out
    wait_until(lambda: list(odradek_cluster.partition_state(topic, 0).replicas) == reordered, timeout=30,
               message="the replica order changed")
    out = runner.run("kafka-leader-election", [*bootstrap(odradek), "--election-type", "preferred",
                                               "--topic", topic, "--partition", "0"])
    assert out.rc == 0 and f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in out.out, out
    wait_until(lambda: odradek_cluster.partition_state(topic, 0).leader == reordered[0], timeout=30,
               message="the preferred replica leading")


def test_kafka_reassign_partitions_generate_execute_verify(runner, sides, odradek_cluster, tmp_path):
    topic = "tools-reassign"
    create(runner, sides, topic, 2)
    for side in sides:
        produce(side, topic, 20, 2)
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = runner.run_both(sides, "kafka-reassign-partitions", lambda s: [
        *bootstrap(s), "--generate", "--topics-to-move-json-file", str(move),
        "--broker-list", ",".join(map(str, s.broker_ids))])
    assert {o.rc for o in generated.values()} == {0}, generated
    for name, o in generated.items():
        lines = [line for line in o.out.splitlines() if line.strip()]
        assert lines[0] == "Current partition replica assignment" and \
            lines[2] == "Proposed partition reassignment configuration", o
        proposal = json.loads(lines[3])
        assert sorted(p["partition"] for p in proposal["partitions"]) == [0, 1], o

    # the plan: on odradek partition 0 moves off broker 3 onto... the same three brokers in another order, and
    # partition 1 to a replica set rotated by one; on the single node, everything stays on broker 1
    def plan_for(side) -> str:
        if side.name == "kafka":
            replicas = {0: [1], 1: [1]}
        else:
            current = {p: odradek_cluster.partition_state(topic, p).replicas for p in (0, 1)}
            replicas = {p: r[1:] + r[:1] for p, r in current.items()}
        path = tmp_path / f"plan-{side.name}.json"
        path.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": p, "replicas": r} for p, r in replicas.items()]}))
        return str(path)

    plans = {s.name: plan_for(s) for s in sides}
    executed = runner.run_both(sides, "kafka-reassign-partitions", lambda s: [
        *bootstrap(s), "--reassignment-json-file", plans[s.name], "--execute", "--throttle", "50000000"])
    assert {o.rc for o in executed.values()} == {0}, executed
    for o in executed.values():
        assert "Successfully started partition reassignments for" in o.out, o

    def verified(side) -> bool:
        o = runner.run("kafka-reassign-partitions", [*bootstrap(side), "--reassignment-json-file", plans[side.name],
                                                     "--verify"])
        last[side.name] = o
        return o.rc == 0 and all(f"Reassignment of partition {topic}-{p} is completed." in o.out for p in (0, 1))

    last: dict = {}
    for side in sides:
        wait_until(lambda: verified(side), timeout=60, interval=1.0,
                   message=f"{side.name}: --verify to report completion and exit 0 ({last.get(side.name)})")
    # the throttles are cleared on every broker: three against one
    assert_same(last, sides, lambda text, side: text.replace(
        "on brokers 1,2,3" if side.name == "odradek" else "on broker 1", "on <brokers>"))
    # --verify cleared the throttles it set: no throttle left on the topic or the brokers
    for side in sides:
        out = runner.run("kafka-configs", [*bootstrap(side), "--entity-type", "topics", "--entity-name", topic,
                                           "--describe"])
        assert out.rc == 0 and "throttled" not in out.out, out
        out = runner.run("kafka-configs", [*bootstrap(side), "--entity-type", "brokers", "--entity-name",
                                           str(side.broker_id), "--describe"])
        assert out.rc == 0 and "throttled" not in out.out, out
    assert {p: list(odradek_cluster.partition_state(topic, p).replicas) for p in (0, 1)} == {
        p["partition"]: p["replicas"] for p in json.loads(open(plans["odradek"]).read())["partitions"]}
    assert_same(runner.run_both(sides, "kafka-get-offsets", lambda s: [*bootstrap(s), "--topic", topic]), sides)


def test_verifiable_producer_and_consumer(runner, sides):
    topic = "tools-verifiable"
    create(runner, sides, topic, 2)
    produced = runner.run_both(sides, "kafka-verifiable-producer", lambda s: [
        *bootstrap(s), "--topic", topic, "--max-messages", "200", "--acks", "-1"])

    def events(o, name: str) -> list[dict]:
        return [e for e in map(json.loads, (line for line in o.out.splitlines() if line.startswith("{")))
                if e.get("name") == name]

    for name, o in produced.items():
        assert o.rc == 0, o
        (summary,) = events(o, "tool_data")
        assert (summary["sent"], summary["acked"]) == (200, 200), o
    consumed = runner.run_both(sides, "kafka-verifiable-consumer", lambda s: [
        *bootstrap(s), "--topic", topic, "--group-id", "tools-verifiable", "--max-messages", "200",
        "--reset-policy", "earliest", "--verbose"], timeout=120)
    for name, o in consumed.items():
        assert o.rc == 0, o
        got = sum(e["count"] for e in events(o, "records_consumed"))
        assert got == 200, o
        assert sum(len(e["offsets"]) for e in events(o, "offsets_committed")) >= 1, o
