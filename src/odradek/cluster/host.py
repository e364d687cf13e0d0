"""BrokerHost: what the cluster layer (the single node's LocalController, the ZooKeeper ClusterMember and its
ZkAdmin) needs of the broker that runs it. The broker hands itself over at construction; the cluster reaches
it only through these names, so that nothing in cluster/ imports the broker layer above it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Protocol

from odradek.cluster.metadata import MetadataCache
from odradek.cluster.replica_manager import ReplicaManager
from odradek.config import BrokerConfig
from odradek.net.listeners import ListenerSetup
from odradek.security.authorizer import Authorizer
from odradek.security.quotas import ClientQuotas
from odradek.security.scram_store import ScramStore
from odradek.storage import LogManager

# (name, partitions, configs) of an internal topic, as it is created
InternalTopic = tuple[str, int, dict[str, str]]


class BrokerHost(Protocol):
    config: BrokerConfig
    data_dir: Path
    node_id: int
    listeners: ListenerSetup
    metadata: MetadataCache
    logs: LogManager
    replicas: ReplicaManager
    # the security state the cluster loads and stores (a file each on a single node, ZooKeeper in a cluster)
    scram: ScramStore
    authorizer: Authorizer
    quotas: ClientQuotas
    # the coordinators' topics: created on a first start, and on first use
    internal_topics: list[InternalTopic]
    on_demand_topics: list[InternalTopic]
    # cut off from the cluster: client connections are closed and refused
    fenced: bool
    drop_connections: Callable[[], None]
    knows_cluster: bool

    def cluster_known(self) -> None:
        """The cluster told this broker what it is: held client requests go on."""

    def cluster_unknown(self) -> None:
        """What this broker knows of the cluster may be stale (a lost session): hold client requests."""

    def topic_configs_changed(self, name: str) -> None:
        """A topic's overrides changed."""

    def apply_dynamic_configs(self, defaults: dict[str, str], own: dict[str, str]) -> None:
        """The dynamic broker configs stored now (cluster-wide defaults, this broker's own): apply them."""

    def internal_topic_partitions(self, name: str, partitions: int) -> None:
        """The cluster's internal topic ``name`` has this many partitions."""

    def notify_append(self, topic: str, partition: int) -> None:
        """New records (or a new state) in a partition: wake the fetches parked on it."""
