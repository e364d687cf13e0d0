"""Client quotas in cluster mode: set through one broker with the Java Admin client, kept in ZooKeeper's
/config/users and /config/clients as Kafka keeps them (beside a user's SCRAM credentials), and known to
every broker once the change notification reaches it, and to a broker that restarts."""

from __future__ import annotations

import json
import socket

import pytest
from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kazoo.client import KazooClient

from tests.interop.conftest import java_client  # noqa: F401 - the session fixture, shared with tests/interop
from tests.interop.helpers import wait_until
from tests.security.test_quotas import call


def quotas_seen_by(port: int) -> dict[tuple, dict[str, float]]:
    """Every quota entity a broker describes: ((type, name), ...) -> {key: value}."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        body = call(sock, 48, 1, {"components": [], "strict": False}, 1)
    assert body["error_code"] == 0
    return {tuple(sorted((p["entity_type"], p["entity_name"]) for p in e["entity"])):
            {v["key"]: v["value"] for v in e["values"]} for e in body["entries"]}


@pytest.mark.timeout(180)
def test_quotas_live_in_zookeeper_and_reach_every_broker(cluster_factory, java_client):  # noqa: F811
    cluster = cluster_factory(2, settings={
        "offsets.topic.replication.factor": "2", "transaction.state.log.replication.factor": "2",
        "transaction.state.log.min.isr": "1"})
    cluster.start()
    cluster.wait_ready()
    admin = cluster.admin([1])  # kept referenced while its futures are pending
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")]).values():
        future.result(10)

    boot = cluster.broker(1).bootstrap
    assert java_client.run("quotas-alter", boot, "user=alice", "producer_byte_rate=1048576") == ["ok"]
    assert java_client.run("quotas-alter", boot, "user=alice,client-id=etl", "request_percentage=25.5") == ["ok"]
    assert java_client.run("quotas-alter", boot, "client-id=<default>", "consumer_byte_rate=2000000") == ["ok"]
    expected = {(("user", "alice"),): {"producer_byte_rate": 1048576.0},
                (("client-id", "etl"), ("user", "alice")): {"request_percentage": 25.5},
                (("client-id", None),): {"consumer_byte_rate": 2000000.0}}
    for bid in cluster.ids:
        wait_until(lambda: quotas_seen_by(cluster.broker(bid).port) == expected, timeout=20, interval=0.3,
                   message=f"broker {bid} knowing the quotas")

    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=10)
    try:
        user = json.loads(zk.get("/config/users/alice")[0])["config"]
        client = json.loads(zk.get("/config/users/alice/clients/etl")[0])["config"]
        default = json.loads(zk.get("/config/clients/<default>")[0])["config"]
    finally:
        zk.stop()
    assert user["producer_byte_rate"] == "1048576" and "SCRAM-SHA-256" in user  # the credential is kept
    assert client == {"request_percentage": "25.5"}
    assert default == {"consumer_byte_rate": "2000000"}

    # a restarted broker reads them from ZooKeeper; a removal reaches every broker
    cluster.restart(2)
    assert quotas_seen_by(cluster.broker(2).port) == expected
    assert java_client.run("quotas-alter", boot, "user=alice", "producer_byte_rate=") == ["ok"]
    del expected[(("user", "alice"),)]
    for bid in cluster.ids:
        wait_until(lambda: quotas_seen_by(cluster.broker(bid).port) == expected, timeout=20, interval=0.3,
                   message=f"broker {bid} dropping the removed quota")
