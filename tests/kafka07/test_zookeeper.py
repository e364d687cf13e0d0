"""The 0.7 ZooKeeper registry: a cluster broker with a KAFKA07 listener registers itself and its topics under
`legacy.zookeeper.chroot`, and a ZooKeeper-based 0.7 producer and consumer find it there.

Neither npm client reads ZooKeeper (both take a host and port), so the ZooKeeper-based client is ours: it
walks the registry as a 0.7 client does (/brokers/topics/<topic> for the broker ids and partition counts,
/brokers/ids/<id> for the address) and speaks 0.7 to what it found.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from tests.interop.helpers import wait_until
from tests.kafka07.client07 import Client07, payloads

CHROOT = "/legacy07"


def test_registry_entries_and_a_zookeeper_based_client(zookeeper, cluster_factory) -> None:
    cluster = cluster_factory(1, settings={"legacy.zookeeper.chroot": CHROOT, "num.partitions": "2"})
    ports = cluster.add_listener("KAFKA07")
    cluster.start()
    zk = KazooClient(hosts=zookeeper.connect_string + CHROOT)
    zk.start(timeout=10)
    try:
        data, stat = wait_until(lambda: zk.exists("/brokers/ids/1") and zk.get("/brokers/ids/1"), timeout=15,
                                message="the broker's 0.7 registration")
        creator, host, port = data.decode().rsplit(":", 2)
        assert (host, int(port)) == ("127.0.0.1", ports[1]) and creator.startswith("127.0.0.1-")
        assert stat.ephemeralOwner != 0

        # a first write creates the topic (0.7 producers send new topics to partition 0); its entry follows
        with Client07("127.0.0.1", ports[1]) as client:
            client.produce("zk-topic", 0, [b"hello"])
        count, stat = wait_until(lambda: zk.exists("/brokers/topics/zk-topic/1")
                                 and zk.get("/brokers/topics/zk-topic/1"), timeout=15, message="the topic entry")
        assert count == b"2" and stat.ephemeralOwner != 0

        # the ZooKeeper-based client: broker ids and partition counts of the topic, then their addresses
        found = {int(b): int(zk.get(f"/brokers/topics/zk-topic/{b}")[0]) for b in zk.get_children(
            "/brokers/topics/zk-topic")}
        assert found == {1: 2}
        address = zk.get("/brokers/ids/1")[0].decode().rsplit(":", 2)
        with Client07(address[1], int(address[2])) as client:
            client.produce("zk-topic", 1, [b"via zookeeper"])
            fetched = wait_until(lambda: payloads(client.fetch("zk-topic", 1, 0)[1]), timeout=10)
            assert fetched == [b"via zookeeper"]
            assert payloads(client.fetch("zk-topic", 0, 0)[1]) == [b"hello"]

        assert zk.exists(f"{cluster.chroot}") is None  # nothing of the cluster's own tree under the chroot
        cluster.stop_all()
        wait_until(lambda: zk.exists("/brokers/ids/1") is None, timeout=15, message="the ephemeral entry gone")
    finally:
        zk.stop()
        zk.close()
