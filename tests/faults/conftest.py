"""Fault-injection fixtures.

`network` is a fresh `netns.Network` (a bridge and network namespaces, removed at teardown); `netns_cluster`
builds a ZooKeeper server and brokers 1..n, each in a namespace of its own on it:

    def test_partition(netns_cluster):
        spread = netns_cluster(3, settings=REPLICATED)
        spread.cluster.wait_ready()
        spread.isolate(1)            # broker 1 cut from ZooKeeper and the other brokers
        spread.heal_all()

Where namespaces cannot be made (not root, no iproute2, no kernel support) these tests skip, saying why.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from odradek.tools.zookeeper import ZooKeeperServer
from tests.cluster.conftest import Cluster, zookeeper_factory  # noqa: F401 - the fixture, used below
from tests.cluster.conftest import cluster_factory, zookeeper  # noqa: F401 - fixtures for the loopback fault tests
from tests.faults.netns import Network, NetnsCluster, netns_unavailable

ZOOKEEPER_PORT = 2181  # the server has its namespace to itself


@pytest.fixture
def network() -> Iterator[Network]:
    """A bridge for the test's hosts; everything it made is removed at teardown, also when the test fails."""
    reason = netns_unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be made here: {reason}")
    net = Network.create()
    try:
        yield net
    finally:
        net.close()


@pytest.fixture
def netns_cluster(network: Network, zookeeper_factory: Callable[..., ZooKeeperServer],
                  tmp_path: Path) -> Iterator[Callable[..., NetnsCluster]]:
    """`netns_cluster(3, settings={...})`: ZooKeeper (started) and brokers 1..n (started, not yet waited
    for) each on a host of its own. At teardown the network is healed first (so controlled shutdowns can
    reach the controller), then the brokers stop, then ZooKeeper, then the namespaces go."""
    made: list[NetnsCluster] = []
    counter = itertools.count(1)

    def make(n: int = 3, settings: dict[str, Any] | None = None,
             per_broker: dict[int, dict[str, Any]] | None = None) -> NetnsCluster:
        number = next(counter)
        zk_host = network.add_host(f"zk{number}")
        zookeeper = zookeeper_factory(host=zk_host.address, port=ZOOKEEPER_PORT,
                                      command_prefix=zk_host.command_prefix).start()
        hosts: dict[int | str, Any] = {"zk": zk_host}
        hosts.update({bid: network.add_host(f"c{number}b{bid}") for bid in range(1, n + 1)})
        cluster = Cluster(tmp_path / f"cluster-{number}", zookeeper, n, settings, per_broker,
                          hosts={bid: hosts[bid] for bid in range(1, n + 1)})
        spread = NetnsCluster(cluster, network, zookeeper, hosts)
        made.append(spread)
        cluster.start()
        return spread

    yield make
    network.heal_all()
    for spread in made:
        spread.cluster.stop_all()
