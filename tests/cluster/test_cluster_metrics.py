"""The Prometheus endpoint in cluster mode (broker/metrics.py): every broker ready once registered, and a
killed follower shows as under-replicated partitions on the leaders that remain."""

from __future__ import annotations

import pytest

from tests.cluster.common import REPLICATED, create_topic
from tests.conftest import free_port
from tests.interop.helpers import wait_until
from tests.interop.test_metrics import get, scrape, value


@pytest.mark.timeout(120)
def test_under_replicated_partitions_after_a_follower_dies(cluster_factory, topic_name):
    ports = {bid: free_port() for bid in (1, 2, 3)}
    cluster = cluster_factory(3, settings=REPLICATED,
                              per_broker={bid: {"metrics.listen": f"127.0.0.1:{port}"} for bid, port in ports.items()})
    cluster.start()
    cluster.wait_ready()
    for port in ports.values():
        wait_until(lambda port=port: get(port, "/readyz")[0] == 200, timeout=30, message="/readyz 200")
    create_topic(cluster, topic_name)
    for port in ports.values():
        metrics = scrape(port)
        assert value(metrics, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert value(metrics, "kafka_server_replicamanager_partitioncount") >= 3
    victim = 3
    cluster.kill(victim)
    survivors = [bid for bid in ports if bid != victim]

    def under_replicated() -> float:
        return sum(value(scrape(ports[bid]), "kafka_server_replicamanager_underreplicatedpartitions")
                   for bid in survivors)

    # every partition has a replica on the victim: once the ISRs lose it, each is under-replicated
    wait_until(lambda: under_replicated() >= 3, timeout=45, interval=0.5, message="under-replicated partitions")
    assert all(value(scrape(ports[bid]), "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
               for bid in survivors)
    assert all(get(ports[bid], "/readyz")[0] == 200 for bid in survivors)
