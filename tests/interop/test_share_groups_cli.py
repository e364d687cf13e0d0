"""`odradek groups list|describe|delete` on a share group (KIP-932) of two confluent-kafka ShareConsumers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.interop.helpers import bounded
from tests.interop.test_groups_cli import cli
from tests.reference import conftest as reference
from tests.security import test_tls

# fixtures of other modules: Apache Kafka for the session (skips without it), a test CA, a broker with an SSL
# listener
kafka_reference = reference.kafka_reference
ca, tls_broker = test_tls.ca, test_tls.tls_broker

confluent_kafka = pytest.importorskip("confluent_kafka")

RECORDS_PER_PARTITION = 5
ACCEPTED_PER_PARTITION = 3  # offsets 0-2 accepted, 3-4 held unacknowledged: start offset 3, lag 2


def _json(broker, *args: str) -> object:
    """The command's JSON output (stdout only: notes go to stderr)."""
    proc = subprocess.run([sys.executable, "-m", "odradek", "groups", *args, "--output", "json",
                           "--bootstrap", broker.bootstrap], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout)


@pytest.mark.timeout(60)
def test_groups_cli_shows_and_deletes_a_share_group(broker, topic_name):
    exercise_share_group(broker, topic_name)


@pytest.mark.timeout(120)
def test_groups_cli_on_a_share_group_of_apache_kafka(kafka_reference, topic_name):
    exercise_share_group(kafka_reference, topic_name, kafka=True)


def exercise_share_group(broker, topic_name: str, kafka: bool = False) -> None:
    """Two explicit-mode ShareConsumers take the records of two partitions and accept offsets 0-2 of each;
    `groups list` and `describe` show the group, its members and start offset 3, lag 2 per partition;
    `delete` is refused while they are members and deletes the group once they have left."""
    from confluent_kafka import AcknowledgeType

    from tests.interop.test_share_groups import close_quietly, prepared_group, share_consumer

    # Kafka wants share.record.lock.duration.ms in 15000..60000 (prepared_group's 2 s is for odradek's tests)
    group = prepared_group(broker.bootstrap, topic_name, 2 * RECORDS_PER_PARTITION, partitions=2,
                           share_record_lock_duration_ms="30000")
    consumers = [share_consumer(broker.bootstrap, group, explicit=True) for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe([topic_name])
        got: list[tuple[int, int]] = []
        # a consumer left holding records it did not acknowledge may not poll again (explicit mode raises
        # IllegalStateException); the other consumer takes what is left
        holding: set[int] = set()
        for _ in bounded(200, 30):
            if len(got) >= 2 * RECORDS_PER_PARTITION:
                break
            for i, c in enumerate(consumers):
                if i in holding:
                    continue
                batch = [m for m in c.poll(0.3) if m.error() is None]
                for m in batch:
                    got.append((m.partition(), m.offset()))
                    if m.offset() < ACCEPTED_PER_PARTITION:
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    else:
                        holding.add(i)
                if batch:
                    c.commit_sync(15)
        assert sorted(set(got)) == [(p, o) for p in range(2) for o in range(RECORDS_PER_PARTITION)]

        out = cli(broker, "list")
        assert [group, "STABLE", "share"] in [line.split() for line in out.splitlines()]
        assert {"group": group, "state": "STABLE", "type": "share"} in _json(broker, "list")

        wanted = [{"topic": topic_name, "partition": p, "start_offset": ACCEPTED_PER_PARTITION,
                   "lag": RECORDS_PER_PARTITION - ACCEPTED_PER_PARTITION, "error": None} for p in range(2)]
        described = _json(broker, "describe", group)
        assert (described["type"], described["state"]) == ("share", "STABLE")
        assert len(described["members"]) == 2
        both = [f"{topic_name}:0", f"{topic_name}:1"]
        # odradek assigns every partition to every member; Kafka's simple assignor divides them
        assert sorted({a for m in described["members"] for a in m["assignment"]}) == both
        assert all(m["assignment"] and m["client"] and m["host"] for m in described["members"])
        if kafka:
            # Kafka 4.4 keeps the start offset at the batch's first offset (0) while part of the batch is in
            # flight, and counts the accepted records in the lag's stead
            wanted = [{**w, "start_offset": 0} for w in wanted]
        assert described["offsets"] == wanted

        out = cli(broker, "describe", group)
        assert "START-OFFSET" in out and "LAG" in out and "type share" in out
        for m in described["members"]:
            assert any(line.split()[0] == m["member"] and line.split()[-1] == ",".join(m["assignment"])
                       for line in out.splitlines() if line.strip())
        rows = [line.split() for line in out.splitlines() if line.startswith(topic_name + " ")]
        assert rows == [[topic_name, str(o["partition"]), str(o["start_offset"]), str(o["lag"])] for o in wanted]
        assert cli(broker, "delete", group, rc=1)  # members: not yet
        assert "is a share group" in cli(broker, "reset-offsets", group, "--topic", topic_name, "--to-earliest",
                                         "--execute", rc=1)
    finally:
        for c in consumers:
            close_quietly(c)

    described = None
    for _ in bounded(100, 15):  # the consumers' leave heartbeats are sent on close
        described = _json(broker, "describe", group)
        if described["state"] == "EMPTY":
            break
    assert described is not None and (described["state"], described["members"]) == ("EMPTY", [])
    # the records the members held are released: the start offset is past the accepted ones on both brokers
    assert [(o["start_offset"], o["lag"]) for o in described["offsets"]] == \
        [(ACCEPTED_PER_PARTITION, RECORDS_PER_PARTITION - ACCEPTED_PER_PARTITION)] * 2

    assert "deleted group" in cli(broker, "delete", group)
    assert group not in cli(broker, "list")
    assert _json(broker, "describe", group).get("type") != "share"


@pytest.mark.timeout(60)
def test_share_group_details_over_ssl(tmp_path, ca, tls_broker, topic_name):
    """The tools' own client honours --command-config: `groups list` and `describe` of a share group over an
    SSL listener (the group itself is made over the PLAINTEXT one)."""
    from tests.interop.test_share_groups import close_quietly, poll_records, prepared_group, share_consumer

    broker, secure = tls_broker()
    group = prepared_group(broker.bootstrap, topic_name, 3)
    consumer = share_consumer(broker.bootstrap, group)
    props = tmp_path / "ssl.properties"
    props.write_text(f"security.protocol=SSL\nssl.ca.location={tmp_path / 'ca.pem'}\n")
    over_ssl = ["--bootstrap", f"127.0.0.1:{secure}", "--command-config", str(props), "--output", "json"]
    try:
        consumer.subscribe([topic_name])
        assert len(poll_records(consumer, 3, 20)) == 3
        listed = subprocess.run([sys.executable, "-m", "odradek", "groups", "list", *over_ssl],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert {"group": group, "state": "STABLE", "type": "share"} in json.loads(listed.stdout)
        described = subprocess.run([sys.executable, "-m", "odradek", "groups", "describe", group, *over_ssl],
                                   capture_output=True, text=True, timeout=60)
        assert described.returncode == 0, described.stderr
        data = json.loads(described.stdout)
        assert data["coordinator"] == f"127.0.0.1:{secure}" and len(data["members"]) == 1
        assert [o["partition"] for o in data["offsets"]] == [0]
    finally:
        close_quietly(consumer)


@pytest.mark.timeout(60)
def test_share_group_details_over_sasl_ssl_with_scram(tmp_path, topic_name):
    """SASL_SSL with SCRAM-SHA-512 through the tools' own client: the TLS handshake, then SaslHandshake and the
    two SCRAM rounds (the server's signature checked), then the share-group requests."""
    from confluent_kafka.admin import ScramMechanism

    from tests.interop.test_share_groups import close_quietly, poll_records, prepared_group, share_consumer
    from tests.security.test_sasl import SaslBroker

    sasl = SaslBroker(tmp_path)
    try:
        sasl.add_scram_user("ops", "ops-secret", ScramMechanism.SCRAM_SHA_512)
        bootstrap = sasl.process.bootstrap
        group = prepared_group(bootstrap, topic_name, 2)
        consumer = share_consumer(bootstrap, group)
        try:
            consumer.subscribe([topic_name])
            assert len(poll_records(consumer, 2, 20)) == 2
            props = tmp_path / "scram.properties"
            props.write_text(f"security.protocol=SASL_SSL\nssl.ca.location={sasl.ca_file}\n"
                             "sasl.mechanism=SCRAM-SHA-512\nsasl.username=ops\nsasl.password=ops-secret\n")
            command = [sys.executable, "-m", "odradek", "groups", "describe", group, "--bootstrap",
                       f"127.0.0.1:{sasl.sasl_ssl}", "--command-config", str(props), "--output", "json"]
            described = subprocess.run(command, capture_output=True, text=True, timeout=60)
            assert described.returncode == 0, described.stderr
            data = json.loads(described.stdout)
            assert data["type"] == "share" and len(data["members"]) == 1
            assert data["coordinator"] == f"127.0.0.1:{sasl.sasl_ssl}"
            props.write_text(props.read_text().replace("ops-secret", "wrong"))
            refused = subprocess.run(command[:-2] + ["--timeout", "5"], capture_output=True, text=True, timeout=60)
            assert refused.returncode == 1 and "SASL SCRAM-SHA-512 login as 'ops'" in refused.stderr, refused.stderr
        finally:
            close_quietly(consumer)
    finally:
        sasl.process.stop()
