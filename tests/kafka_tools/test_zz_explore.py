import json
from confluent_kafka import Producer
from .tools import normalise

def show(runner, sides, tool, args):
    res = runner.run_both(sides, tool, args)
    for s in sides:
        print(f"===== {s.name}: {tool} {' '.join(args(s))}\n{res[s.name]}")
    return res

def produce(side, topic, n, partitions):
    p = Producer({"bootstrap.servers": side.bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(30) == 0

def test_explore(runner, sides, tmp_path):
    b = lambda s: ["--bootstrap-server", s.bootstrap]
    show(runner, sides, "kafka-topics", lambda s: [*b(s), "--create", "--topic", "t1", "--partitions", "3", "--replication-factor", str(s.replication)])
    show(runner, sides, "kafka-topics", lambda s: [*b(s), "--describe", "--topic", "t1"])
    show(runner, sides, "kafka-topics", lambda s: [*b(s), "--alter", "--topic", "t1", "--partitions", "4"])
    show(runner, sides, "kafka-topics", lambda s: [*b(s), "--list"])
    for s in sides: produce(s, "t1", 40, 4)
    show(runner, sides, "kafka-get-offsets", lambda s: [*b(s), "--topic", "t1"])
    (tmp_path / "del.json").write_text(json.dumps({"version": 1, "partitions": [{"topic": "t1", "partition": 0, "offset": 5}]}))
    show(runner, sides, "kafka-delete-records", lambda s: [*b(s), "--offset-json-file", str(tmp_path / "del.json")])
    show(runner, sides, "kafka-configs", lambda s: [*b(s), "--entity-type", "topics", "--entity-name", "t1", "--alter", "--add-config", "retention.ms=100000,cleanup.policy=compact"])
    show(runner, sides, "kafka-configs", lambda s: [*b(s), "--entity-type", "topics", "--entity-name", "t1", "--describe"])
    show(runner, sides, "kafka-configs", lambda s: [*b(s), "--entity-type", "brokers", "--entity-default", "--describe"])
    show(runner, sides, "kafka-configs", lambda s: [*b(s), "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "leader.replication.throttled.rate=1000000"])
    show(runner, sides, "kafka-configs", lambda s: [*b(s), "--entity-type", "brokers", "--entity-default", "--describe"])
    show(runner, sides, "kafka-features", lambda s: [*b(s), "describe"])
    show(runner, sides, "kafka-cluster", lambda s: ["cluster-id", *b(s)])
    show(runner, sides, "kafka-log-dirs", lambda s: [*b(s), "--describe", "--topic-list", "t1"])
    show(runner, sides, "kafka-leader-election", lambda s: [*b(s), "--election-type", "preferred", "--all-topic-partitions"])
    (tmp_path / "move.json").write_text(json.dumps({"version": 1, "topics": [{"topic": "t1"}]}))
    show(runner, sides, "kafka-reassign-partitions", lambda s: [*b(s), "--generate", "--topics-to-move-json-file", str(tmp_path / "move.json"), "--broker-list", ",".join(map(str, s.broker_ids))])
    show(runner, sides, "kafka-transactions", lambda s: [*b(s), "list"])
    show(runner, sides, "kafka-transactions", lambda s: [*b(s), "find-hanging", "--broker-id", str(s.broker_id)])
    show(runner, sides, "kafka-acls", lambda s: [*b(s), "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t1"])
    show(runner, sides, "kafka-acls", lambda s: [*b(s), "--list"])
    show(runner, sides, "kafka-topics", lambda s: [*b(s), "--delete", "--topic", "t1"])
    show(runner, sides, "kafka-topics", lambda s: [*b(s), "--list"])
