"""SCRAM credentials in cluster mode: created through one broker, kept in ZooKeeper's /config/users as Kafka
keeps them, and accepted by every broker's SASL listener once the change notification reaches it."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)
from kazoo.client import KazooClient

from tests.interop.helpers import wait_until


def logs_in(port: int, user: str, password: str) -> bool:
    try:
        AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
                     "broker.address.family": "v4"}).list_topics(timeout=3)
    except KafkaException:
        return False
    return True


@pytest.mark.timeout(120)
def test_scram_credentials_live_in_zookeeper_and_reach_every_broker(cluster_factory):
    cluster = cluster_factory(2, settings={
        "offsets.topic.replication.factor": "2", "transaction.state.log.replication.factor": "2",
        "transaction.state.log.min.isr": "1", "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    sasl_ports = cluster.add_listener("SASL_PLAINTEXT")
    cluster.start()
    cluster.wait_ready()

    admin = cluster.admin([1])
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "user,1", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"s3cret")]).values():
        future.result(10)
    for bid, port in sasl_ports.items():
        wait_until(lambda: logs_in(port, "user,1", "s3cret"), timeout=20, interval=0.3,
                   message=f"broker {bid} accepting the new user")
        assert not logs_in(port, "user,1", "wrong")

    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=10)
    try:
        data, _ = zk.get("/config/users/user%2C1")  # the name URL-encoded, as Kafka's Sanitizer writes it
    finally:
        zk.stop()
    stored = json.loads(data)
    assert stored["version"] == 1
    fields = dict(f.split("=", 1) for f in stored["config"]["SCRAM-SHA-256"].split(","))
    assert set(fields) == {"salt", "stored_key", "server_key", "iterations"} and fields["iterations"] == "4096"

    # a restarted broker reads the users from ZooKeeper; a deletion reaches every broker
    cluster.restart(2)
    assert logs_in(sasl_ports[2], "user,1", "s3cret")
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("user,1", ScramMechanism.SCRAM_SHA_256)]).values():
        future.result(10)
    for bid, port in sasl_ports.items():
        wait_until(lambda: not logs_in(port, "user,1", "s3cret"), timeout=20, interval=0.3,
                   message=f"broker {bid} refusing the deleted user")
