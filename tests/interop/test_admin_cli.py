"""`odradek topics|configs|produce|consume|records|groups|cluster` run as subprocesses against a real
odradek broker (a SASL one for --command-config), checked with confluent-kafka's AdminClient, and a few
of them against Apache Kafka (tests/reference) to show they are not odradek-only."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reference.conftest import kafka_reference  # noqa: F401 - the session fixture (skips without Kafka)

from .helpers import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec  # noqa: E402

CLI_TIMEOUT_S = 60


def odradek(bootstrap: str, *args: str, stdin: str | None = None, rc: int = 0,
            config: Path | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "odradek", *args, "--bootstrap", bootstrap]
    if config is not None:
        cmd += ["--command-config", str(config)]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == rc, f"{' '.join(args)}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def as_json(bootstrap: str, *args: str, config: Path | None = None):
    return json.loads(odradek(bootstrap, *args, "--output", "json", config=config).stdout)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def topic_config(bootstrap: str, topic: str, name: str) -> str | None:
    client = admin(bootstrap)
    resource = ConfigResource("topic", topic)
    return client.describe_configs([resource])[resource].result(15)[name].value


def log_start(bootstrap: str, topic: str, partition: int) -> int:
    client = admin(bootstrap)
    tp = TopicPartition(topic, partition)
    return client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(15).offset


def one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    message = proc.stderr.strip()
    assert message and "\n" not in message, f"expected one line on stderr, got {proc.stderr!r}"
    for word in words:
        assert word in message, message


# ---------------------------------------------------------------------------------------------------
# odradek
# ---------------------------------------------------------------------------------------------------


def test_topics_create_list_describe_alter_delete(broker, topic_name):
    b = broker.bootstrap
    out = odradek(b, "topics", "create", topic_name, "--partitions", "2", "--replication-factor", "1",
                  "--config", "retention.ms=60000", "--config", "cleanup.policy=compact").stdout
    assert f"created topic {topic_name}" in out
    md = admin(b).list_topics(topic_name, timeout=15)
    assert sorted(md.topics[topic_name].partitions) == [0, 1]
    assert topic_config(b, topic_name, "retention.ms") == "60000"
    assert topic_config(b, topic_name, "cleanup.policy") == "compact"
    odradek(b, "topics", "create", topic_name, rc=1)
    odradek(b, "topics", "create", topic_name, "--if-not-exists")

    listed = odradek(b, "topics", "list").stdout.splitlines()
    assert listed[0].split() == ["TOPIC", "PARTITIONS", "REPLICATION"]
    assert [topic_name, "2", "1"] in [line.split() for line in listed]
    assert {"topic": topic_name, "partitions": 2, "replication_factor": 1} in as_json(b, "topics", "list")

    described = as_json(b, "topics", "describe", topic_name)
    assert described == {"topic": topic_name, "configs": {"cleanup.policy": "compact", "retention.ms": "60000"},
                         "partitions": [{"partition": p, "leader": 0, "replicas": [0], "isr": [0],
                                         "log_start_offset": 0, "log_end_offset": 0} for p in (0, 1)]}
    text = odradek(b, "topics", "describe", topic_name).stdout
    assert ["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START", "LOG-END"] in [ln.split() for ln in text.splitlines()]

    odradek(b, "topics", "alter", topic_name, "--partitions", "3", "--config", "retention.ms=120000",
            "--delete-config", "cleanup.policy")
    assert sorted(admin(b).list_topics(topic_name, timeout=15).topics[topic_name].partitions) == [0, 1, 2]
    assert topic_config(b, topic_name, "retention.ms") == "120000"
    assert topic_config(b, topic_name, "cleanup.policy") == "delete"  # back to the default
    one_line_error(odradek(b, "topics", "alter", topic_name, "--partitions", "2", rc=1), "can only grow")

    odradek(b, "topics", "delete", topic_name)
    wait_until(lambda: topic_name not in admin(b).list_topics(timeout=15).topics, 15, message="topic deleted")
    one_line_error(odradek(b, "topics", "delete", topic_name, rc=1), "unknown topic", topic_name)
    odradek(b, "topics", "delete", topic_name, "--if-exists")


def test_configs_of_a_topic_and_the_broker(broker_factory, topic_name):
    b = broker_factory({"log.retention.ms": "7200000"}).bootstrap
    odradek(b, "topics", "create", topic_name, "--partitions", "1")
    odradek(b, "configs", "alter", "--entity-type", "topics", "--entity-name", topic_name,
            "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
    assert topic_config(b, topic_name, "cleanup.policy") == "compact,delete"
    described = as_json(b, "configs", "describe", "--entity-type", "topics", "--entity-name", topic_name)
    assert described["entity_name"] == topic_name
    assert {(c["name"], c["value"], c["source"]) for c in described["configs"]} == {
        ("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"), ("cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG")}
    odradek(b, "configs", "alter", "--entity-type", "topics", "--entity-name", topic_name,
            "--delete-config", "retention.ms,cleanup.policy")
    described = as_json(b, "configs", "describe", "--entity-type", "topics", "--entity-name", topic_name)
    assert described["configs"] == []
    every = as_json(b, "configs", "describe", "--entity-type", "topics", "--entity-name", topic_name, "--all")
    assert {c["name"] for c in every["configs"]} >= {"retention.ms", "cleanup.policy", "segment.bytes"}

    broker_cfg = as_json(b, "configs", "describe", "--entity-type", "brokers", "--entity-name", "0")
    assert ("log.retention.ms", "7200000", "STATIC_BROKER_CONFIG") in {
        (c["name"], c["value"], c["source"]) for c in broker_cfg["configs"]}
    text = odradek(b, "configs", "describe", "--entity-type", "brokers").stdout
    assert any(line.split()[:2] == ["log.retention.ms", "7200000"] for line in text.splitlines()), text
    odradek(b, "configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
            "--add-config", "leader.replication.throttled.rate=1048576")
    odradek(b, "configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
            "--delete-config", "leader.replication.throttled.rate")
    one_line_error(odradek(b, "configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
                           "--add-config", "num.partitions=3", rc=1), "dynamically")
    one_line_error(odradek(b, "configs", "describe", "--entity-type", "brokers", "--entity-name", "7", rc=1),
                   "unknown broker 7")
    one_line_error(odradek(b, "configs", "describe", "--entity-type", "topics", "--entity-name", "no-such", rc=1),
                   "unknown topic no-such")


LINES = "k1:hello\nk2:world:with:colons\nno key here\n:empty key\n"


def test_produce_then_consume_with_format_and_json(broker, topic_name):
    b = broker.bootstrap
    odradek(b, "topics", "create", topic_name, "--partitions", "2")
    odradek(b, "produce", topic_name, "-K", ":", "-H", "source=cli", "-H", "n=1", "-p", "1", stdin=LINES)
    out = odradek(b, "consume", topic_name, "-e", "-f", r"%t|%p|%o|%k|%s|%h|%K|%S\n").stdout
    assert out == (f"{topic_name}|1|0|k1|hello|source=cli,n=1|2|5\n"
                   f"{topic_name}|1|1|k2|world:with:colons|source=cli,n=1|2|17\n"
                   f"{topic_name}|1|2||no key here|source=cli,n=1|-1|11\n"
                   f"{topic_name}|1|3||empty key|source=cli,n=1|0|9\n")
    records = json_lines(odradek(b, "consume", topic_name, "-e", "--output", "json").stdout)
    for r in records:
        assert isinstance(r.pop("timestamp"), int)
    headers = [["source", "cli"], ["n", "1"]]
    assert records == [
        {"topic": topic_name, "partition": 1, "offset": 0, "key": "k1", "value": "hello", "headers": headers},
        {"topic": topic_name, "partition": 1, "offset": 1, "key": "k2", "value": "world:with:colons", "headers": headers},
        {"topic": topic_name, "partition": 1, "offset": 2, "key": None, "value": "no key here", "headers": headers},
        {"topic": topic_name, "partition": 1, "offset": 3, "key": "", "value": "empty key", "headers": headers}]
    # the default format is the value and a newline; -c stops early
    assert odradek(b, "consume", topic_name, "-c", "2").stdout == "hello\nworld:with:colons\n"
    # without -K the line is the value
    odradek(b, "produce", topic_name, "-p", "0", stdin="a:b\n")
    assert odradek(b, "consume", topic_name, "-e", "-p", "0", "-f", r"%k/%s\n").stdout == "/a:b\n"


def test_consume_from_an_offset_and_from_a_timestamp(broker, topic_name):
    b = broker.bootstrap
    odradek(b, "topics", "create", topic_name, "--partitions", "1")
    odradek(b, "produce", topic_name, stdin="a\nb\nc\n")
    first = json_lines(odradek(b, "consume", topic_name, "-e", "--output", "json").stdout)
    boundary = max(r["timestamp"] for r in first) + 1
    wait_until(lambda: time.time() * 1000 > boundary + 5, 5, message="the clock passes the first batch")
    odradek(b, "produce", topic_name, stdin="d\ne\n")
    assert odradek(b, "consume", topic_name, "-e", "-o", "2").stdout == "c\nd\ne\n"
    assert odradek(b, "consume", topic_name, "-e", "-o", "-2").stdout == "d\ne\n"
    assert odradek(b, "consume", topic_name, "-e", "-o", f"@{boundary}").stdout == "d\ne\n"
    assert odradek(b, "consume", topic_name, "-e", "-o", f"@{boundary + 10**9}").stdout == ""
    assert odradek(b, "consume", topic_name, "-e", "-o", "end").stdout == ""
    assert odradek(b, "consume", topic_name, "-e", "-o", "beginning", "-f", r"%o ").stdout == "0 1 2 3 4 "
    # as a group member: offsets committed, a second run reads nothing new
    group = f"g-{topic_name}"
    assert odradek(b, "consume", topic_name, "-e", "--group", group).stdout == "a\nb\nc\nd\ne\n"
    described = as_json(b, "groups", "describe", group)
    assert [(o["partition"], o["committed"], o["lag"]) for o in described["offsets"]] == [(0, 5, 0)]
    assert odradek(b, "consume", topic_name, "-e", "--group", group).stdout == ""


def test_records_delete_moves_the_log_start(broker, topic_name):
    b = broker.bootstrap
    odradek(b, "topics", "create", topic_name, "--partitions", "2")
    odradek(b, "produce", topic_name, "-p", "0", stdin="".join(f"r{i}\n" for i in range(5)))
    result = as_json(b, "records", "delete", topic_name, "--partition", "0", "--before", "3")
    assert result == [{"topic": topic_name, "partition": 0, "log_start_offset": 3}]
    assert log_start(b, topic_name, 0) == 3
    assert odradek(b, "consume", topic_name, "-e", "-p", "0").stdout == "r3\nr4\n"
    assert as_json(b, "topics", "describe", topic_name)["partitions"][0]["log_start_offset"] == 3
    one_line_error(odradek(b, "records", "delete", topic_name, "--partition", "5", "--before", "1", rc=1),
                   "no partition 5")


def test_bad_input_exits_non_zero_with_one_line(broker, topic_name):
    b = broker.bootstrap
    for args in (("topics", "describe", "no-such-topic"), ("consume", "no-such-topic", "-e"),
                 ("records", "delete", "no-such-topic", "--before", "1")):
        one_line_error(odradek(b, *args, rc=1), "unknown topic no-such-topic")
    one_line_error(odradek(b, "produce", "no-such-topic", stdin="x\n", rc=1), "unknown topic no-such-topic")
    odradek(b, "topics", "create", topic_name, "--partitions", "1")
    one_line_error(odradek(b, "consume", topic_name, "-o", "sometime", rc=1), "bad -o")
    one_line_error(odradek(b, "topics", "create", "x", "--partitions", "0", rc=1), "--partitions")
    one_line_error(odradek(b, "produce", topic_name, "-p", "3", stdin="x\n", rc=1), "no partition 3")
    assert "expected key=value" in odradek(b, "topics", "create", "x", "--config", "novalue", rc=2).stderr
    started = time.monotonic()
    for args in (("topics", "list"), ("groups", "list"), ("consume", topic_name, "-e")):
        proc = odradek("127.0.0.1:1", *args, "--timeout", "2", rc=1)
        one_line_error(proc, "cannot reach 127.0.0.1:1")
    assert time.monotonic() - started < 30
    one_line_error(odradek(b, "topics", "list", config=Path("/no/such/file.properties"), rc=1),
                   "--command-config")


def test_command_config_logs_in_over_sasl(tmp_path, topic_name):
    from tests.security.test_sasl import SaslBroker

    sasl = SaslBroker(tmp_path)
    try:
        b = f"127.0.0.1:{sasl.sasl_plaintext}"
        props = tmp_path / "client.properties"
        props.write_text("# an admin over SASL/PLAIN\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         "sasl.username=admin\nsasl.password=admin-secret\nclient.id=odradek-admin-cli\n")
        odradek(b, "topics", "create", topic_name, "--partitions", "1", config=props)
        odradek(b, "produce", topic_name, "-K", "=", stdin="k=v\n", config=props)
        assert odradek(b, "consume", topic_name, "-e", "-f", r"%k %s\n", config=props).stdout == "k v\n"
        assert as_json(b, "topics", "describe", topic_name, config=props)["partitions"][0]["log_end_offset"] == 1
        odradek(b, "configs", "describe", "--entity-type", "brokers", config=props)
        assert odradek(b, "consume", topic_name, "-e", "--group", "sasl-g", config=props).stdout == "v\n"
        assert {"group": "sasl-g", "state": "EMPTY", "type": "consumer"} in as_json(b, "groups", "list", config=props)
        cluster = as_json(b, "cluster", "describe", config=props)
        assert [p["topic"] for p in cluster["partitions"]] == [topic_name]
        # without the file, or with a wrong password, the SASL listener does not let the tool in
        odradek(b, "topics", "list", "--timeout", "3", rc=1)
        bad = tmp_path / "bad.properties"
        bad.write_text(props.read_text().replace("admin-secret", "wrong"))
        one_line_error(odradek(b, "topics", "list", "--timeout", "3", config=bad, rc=1))
    finally:
        sasl.process.stop()


# ---------------------------------------------------------------------------------------------------
# Apache Kafka
# ---------------------------------------------------------------------------------------------------


def test_commands_against_apache_kafka(kafka_reference, topic_name, tmp_path):  # noqa: F811
    b = kafka_reference.bootstrap
    props = tmp_path / "client.properties"
    props.write_text("client.id=odradek-cli-on-kafka\n")
    odradek(b, "topics", "create", topic_name, "--partitions", "2", "--config", "retention.ms=600000", config=props)
    assert topic_config(b, topic_name, "retention.ms") == "600000"
    odradek(b, "configs", "alter", "--entity-type", "topics", "--entity-name", topic_name,
            "--add-config", "max.message.bytes=200000")
    described = as_json(b, "configs", "describe", "--entity-type", "topics", "--entity-name", topic_name)
    assert {c["name"]: c["value"] for c in described["configs"]} == {"retention.ms": "600000",
                                                                      "max.message.bytes": "200000"}
    odradek(b, "produce", topic_name, "-K", ":", "-H", "h=1", "-p", "0", stdin=LINES)
    out = odradek(b, "consume", topic_name, "-e", "-f", r"%p %o %k=%s %h\n", config=props).stdout
    assert out == "0 0 k1=hello h=1\n0 1 k2=world:with:colons h=1\n0 2 =no key here h=1\n0 3 =empty key h=1\n"
    assert as_json(b, "records", "delete", topic_name, "--partition", "0", "--before", "2")[0]["log_start_offset"] == 2
    parts = as_json(b, "topics", "describe", topic_name)["partitions"]
    assert [(p["partition"], p["log_start_offset"], p["log_end_offset"]) for p in parts] == [(0, 2, 4), (1, 0, 0)]
    odradek(b, "topics", "alter", topic_name, "--partitions", "3")
    assert len(as_json(b, "topics", "describe", topic_name)["partitions"]) == 3
    cluster = as_json(b, "cluster", "describe", "--topic", topic_name, config=props)
    assert len(cluster["brokers"]) == 1 and len(cluster["partitions"]) == 3
    assert odradek(b, "consume", topic_name, "-e", "--group", f"g-{topic_name}").stdout.count("\n") == 2
    assert any(g["group"] == f"g-{topic_name}" for g in as_json(b, "groups", "list"))
    odradek(b, "configs", "describe", "--entity-type", "brokers")
    odradek(b, "topics", "delete", topic_name)
    one_line_error(odradek(b, "topics", "describe", "no-such-topic", rc=1), "unknown topic")
