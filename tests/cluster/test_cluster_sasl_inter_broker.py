"""Brokers that log in to each other: the inter-broker listener is SASL_PLAINTEXT (PLAIN) or SASL_SSL
(SCRAM-SHA-512), and every broker logs in to the others' listener before it replicates, as the controller does
before its requests (net/sasl_client.py, cluster/broker_client.py).

Three real brokers on one ZooKeeper, each with a PLAINTEXT listener (the tests' bootstrap) and the SASL one
brokers use; confluent-kafka clients produce acks=all over the SASL listener. A broker with the wrong
inter-broker password is shut out: the controller cannot reach it, or (with only the password it sends wrong)
its follower cannot log in to the leader; it never gets in sync, and both sides log the failed login (without
the password)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from odradek.cluster import zk_layout as L
from odradek.net.sasl import ScramCredential
from odradek.protocol import codec
from odradek.protocol.errors import ErrorCode
from tests.cluster.checker import LoadProducer, check_history, read_partitions
from tests.cluster.common import REPLICATED, create_topic, full_isr, kill_leader_under_load
from tests.cluster.test_cluster_tls import connected_ports
from tests.interop.helpers import read_frame, wait_until
from tests.security.certs import TestCA
from tests.security.test_tls import serve

SECRET = "broker-secret"
WRONG = "not-the-secret"


def plain_jaas(password: str = SECRET, accepted: str = SECRET) -> str:
    """The listener's PLAIN JAAS config: what the broker logs in with, and the users it accepts."""
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
            f'password="{password}" user_broker="{accepted}" user_alice="alice-secret";')


PLAIN_INTER_BROKER = {
    **REPLICATED,
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(),
}


def alice(port: int) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
            "sasl.password": "alice-secret", "bootstrap.servers": f"127.0.0.1:{port}"}


def assert_replicates_over(cluster, ports: dict[int, int]) -> None:
    """Every broker holds connections to another broker's ``ports`` (the SASL listener) and none to a
    PLAINTEXT one."""
    for bid, broker in cluster.brokers.items():
        if not broker.is_running():
            continue
        others = {port for other, port in ports.items() if other != bid}
        plain_ports = {b.port for other, b in cluster.brokers.items() if other != bid}
        wait_until(lambda: connected_ports(broker.proc.pid) & others, timeout=10,
                   message=f"broker {bid} connected to another broker's SASL listener")
        assert not connected_ports(broker.proc.pid) & plain_ports, f"broker {bid} talks to a PLAINTEXT listener"


def topic_metadata(cluster, broker_id: int, topic: str, timeout: float = 10.0) -> dict:
    """``topic`` as the broker's metadata cache has it (what the controller's UpdateMetadata told it): one
    Metadata v4 request, without auto-creation, to its PLAINTEXT listener. Asked of one broker alone: a
    client such as confluent-kafka's admin would also ask broker 3, whom the controller never reached and who
    so lists no other broker (which librdkafka takes for a partial answer)."""
    with socket.create_connection(("127.0.0.1", cluster.broker(broker_id).port), timeout=5) as sock:
        sock.sendall(codec.encode_request(3, 4, 1, "test", {"topics": [{"name": topic}],
                                                            "allow_auto_topic_creation": False}))
        _, answer = codec.decode_response(3, 4, read_frame(sock, timeout=timeout))
    return answer["topics"][0]


def broker_knows(cluster, broker_id: int, topic: str) -> bool:
    """Whether the broker answers Metadata with ``topic``; False while it holds the request (a broker the
    controller has not told of the cluster answers no client: Broker.knows_cluster)."""
    try:
        return topic_metadata(cluster, broker_id, topic, timeout=2.0)["error_code"] == ErrorCode.NONE
    except (TimeoutError, OSError, EOFError):
        return False


def holds_metadata(cluster, broker_id: int, topic: str, seconds: float = 3.0) -> bool:
    """Whether the broker leaves a Metadata request unanswered for ``seconds`` (held, not refused)."""
    try:
        topic_metadata(cluster, broker_id, topic, timeout=seconds)
    except TimeoutError:
        return True
    return False


def isr(cluster, broker_id: int, topic: str) -> list[int]:
    """Partition 0's ISR as ``broker_id`` tells it."""
    return sorted(topic_metadata(cluster, broker_id, topic)["partitions"][0]["isr_nodes"])


def log_of(cluster, broker_id: int) -> str:
    return cluster.broker(broker_id).log_tail(10_000_000)


@pytest.mark.timeout(240)
def test_brokers_log_in_with_plain_replicate_and_fail_over(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=PLAIN_INTER_BROKER)
    sasl_ports = cluster.add_listener("SASL_PLAINTEXT")
    cluster.start()
    cluster.wait_ready()
    # the followers fetch over the SASL listener, logged in: every ISR fills
    create_topic(cluster, topic_name, partitions=3)
    assert_replicates_over(cluster, sasl_ports)

    load = LoadProducer(f"127.0.0.1:{sasl_ports[1]}", topic_name, 3, **alice(sasl_ports[1]))
    victim, _ = kill_leader_under_load(cluster, topic_name, load.start())

    # the killed broker logs in again as it comes back, catches up and rejoins every ISR
    cluster.broker(victim).start()
    wait_until(lambda: full_isr(cluster, topic_name, 3), timeout=60, message="the restarted broker back in every ISR")
    logs = cluster.logs(10_000_000)
    assert "SASL: failed" not in logs and "login as" not in logs, logs


@pytest.mark.timeout(240)
def test_a_broker_with_the_wrong_inter_broker_password_is_shut_out(cluster_factory, topic_name):
    # broker 3 has the wrong password in both places (the one it sends and the one it accepts for `broker`),
    # as a typo in its JAAS config would; it is not asked to move leaders on its way out (it cannot log in)
    wrong = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(WRONG, WRONG),
             "controlled.shutdown.enable": "false"}
    cluster = cluster_factory(3, settings=PLAIN_INTER_BROKER, per_broker={3: wrong})
    cluster.add_listener("SASL_PLAINTEXT")
    cluster.broker(1).start()
    cluster.broker(2).start()
    controller = cluster.wait_ready().controller_id  # 1 or 2: one that logs in right
    cluster.broker(3).start()
    wait_until(lambda: 3 in cluster.metadata(1).brokers, timeout=20, message="broker 3 registered")
    admin = cluster.admin([1])
    admin.create_topics([NewTopic(topic_name, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic_name].result(30)

    # the controller cannot reach broker 3: its login is refused, logged on both sides, and broker 3 never
    # learns of the topic it is a replica of
    wait_until(lambda: "SASL PLAIN login as 'broker' to broker 3" in log_of(cluster, controller), timeout=20,
               message="the controller's failed login to broker 3 in its log")
    assert "Invalid username or password" in log_of(cluster, controller)
    wait_until(lambda: "SASL: failed PLAIN login from" in log_of(cluster, 3), timeout=20,
               message="broker 3 logging the refused login")
    assert "(user 'broker')" in log_of(cluster, 3)

    # the leader drops broker 3 from the ISR once it has lagged replica.lag.time.max.ms, and it never returns
    wait_until(lambda: isr(cluster, 1, topic_name) == [1, 2], timeout=30,
               message="broker 3 out of the ISR")
    deadline = time.monotonic() + 6  # more than the lag time again: broker 3 would be back by now
    while time.monotonic() < deadline:
        assert 3 not in isr(cluster, 1, topic_name)
        time.sleep(0.3)
    # broker 3, never told of the cluster by the controller, answers no client rather than an empty cluster
    assert holds_metadata(cluster, 3, topic_name)

    # broker 3 with the right password for those logging in to it but still the wrong one to send: the
    # controller reaches it now, but its follower cannot log in to the leader and never catches up
    cluster.kill(3)
    cluster.broker(3).settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = plain_jaas(WRONG, SECRET)
    cluster.broker(3).start()
    wait_until(lambda: broker_knows(cluster, 3, topic_name), timeout=30,
               message="broker 3 told of the topic by the controller")
    wait_until(lambda: "SASL PLAIN login as 'broker' to broker 1" in log_of(cluster, 3), timeout=20,
               message="broker 3's follower failing to log in to the leader")
    wait_until(lambda: "SASL: failed PLAIN login from" in log_of(cluster, 1), timeout=20,
               message="the leader logging broker 3's refused login")
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        assert isr(cluster, 1, topic_name) == [1, 2]
        time.sleep(0.3)
    # passwords stay out of every log
    logs = cluster.logs(10_000_000)
    assert WRONG not in logs and SECRET not in logs


@pytest.mark.timeout(240)
def test_brokers_log_in_with_scram_over_sasl_ssl_and_reauthenticate(cluster_factory, tmp_path: Path, topic_name):
    ca = TestCA()
    keystore = ca.issue("broker", server=True).keystore(tmp_path / "broker.pem")
    truststore = ca.truststore(tmp_path / "ca.pem")
    cluster = cluster_factory(3, settings={
        **REPLICATED, "inter.broker.listener.name": "SASL_SSL", "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(truststore), "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
            'password="admin-secret";',
        # sessions end every 4 s: brokers log in again on their open connections (KIP-368)
        "connections.max.reauth.ms": "4000"})
    sasl_ports = cluster.add_listener("SASL_SSL")
    # the inter-broker user's credential exists before the brokers start, in ZooKeeper in Kafka's format, as
    # `kafka-configs --zookeeper ... --alter --add-config SCRAM-SHA-512=[password=...] --entity-name admin` writes it
    zk = KazooClient(hosts=cluster.zookeeper.connect_string)
    zk.start(timeout=10)
    try:
        credential = ScramCredential.from_password("SCRAM-SHA-512", "admin-secret", 8192)
        zk.create(cluster.chroot + L.user_config_path("admin"),
                  L.encode_topic_config({"SCRAM-SHA-512": credential.to_text()}), makepath=True)
    finally:
        zk.stop()
    cluster.start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=3)
    assert_replicates_over(cluster, sasl_ports)

    over_sasl_ssl = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(truststore),
                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": "admin-secret"}
    load = LoadProducer(f"127.0.0.1:{sasl_ports[2]}", topic_name, 3, interval_s=0.01, **over_sasl_ssl)
    load.start()
    # three session lifetimes of replication under load: every ISR stays full, and no broker's connection is
    # closed for a session that ran out
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        assert full_isr(cluster, topic_name, 3), cluster.metadata().topics[topic_name]
        time.sleep(0.5)
    ledger = load.stop()
    assert not ledger.errors and ledger.count() > 300, (ledger.count(), ledger.errors[:5])
    history = check_history(ledger.acked, read_partitions(cluster.bootstrap, topic_name, 3))
    assert history.ok, str(history)
    logs = cluster.logs(10_000_000)
    assert "after its SASL session expired" not in logs and "SASL: failed" not in logs, logs
    assert "admin-secret" not in logs


BASE = {"zookeeper.connect": "127.0.0.1:1", "broker.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas()}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("settings, expected", [
    # Kafka's default mechanism, GSSAPI, is not one odradek's brokers log in with
    ({}, "sasl.mechanism.inter.broker.protocol: brokers cannot log in to each other with GSSAPI"),
    ({"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "cannot log in to each other with GSSAPI"),
    ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER", "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
      "sasl.oauthbearer.jwks.endpoint.url": "https://127.0.0.1:1/jwks"},
     "cannot log in to each other with OAUTHBEARER"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}, "SCRAM-SHA-256 is not among the mechanisms"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x required user_broker="b";'},
     'plain.sasl.jaas.config must give username="..." and password="..."'),
])
def test_inter_broker_sasl_misconfigurations_are_refused_at_start(tmp_path, settings, expected):
    result = serve(tmp_path / "data", {**BASE, **settings})
    assert result.returncode == 2, result.stderr
    assert "configuration error" in result.stderr and expected in result.stderr, result.stderr
