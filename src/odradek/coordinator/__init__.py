"""Consumer groups and committed offsets (classic protocol), kept in the internal topic `__consumer_offsets`,
transactions, kept in `__transaction_state`, and share groups, whose delivery state is kept in
`__share_group_state`.

Modules: `group` (one group's state), `group_coordinator` (membership: join/sync/heartbeat/leave, timers),
`offset_manager` (commit/fetch/delete, expiry), `offsets` (the in-memory offset map), `persistence` (the
record format and the log writer/replayer), `placement` (the partition of a coordinator key: Kafka's rule), `timers` (real and fake clocks), `service` (the wiring),
`transactions` and `txn_state` (the transaction coordinator),
`share_partition`, `share_groups` and `share_state` (share groups: delivery state, membership and sessions,
and their topic).
"""

from odradek.coordinator.service import OFFSETS_TOPIC, Coordinator, offsets_topic_configs
from odradek.coordinator.share_state import SHARE_STATE_TOPIC
from odradek.coordinator.transactions import TXN_TOPIC, txn_topic_configs

__all__ = ["Coordinator", "OFFSETS_TOPIC", "SHARE_STATE_TOPIC", "TXN_TOPIC", "internal_topics",
           "offsets_topic_configs", "on_demand_topics"]


def internal_topics(config) -> list[tuple[str, int, dict[str, str]]]:
    """(name, partitions, configs) of the internal topics, as they are created on a first start."""
    return [
        (OFFSETS_TOPIC, config.int("offsets.topic.num.partitions"), offsets_topic_configs(config)),
        (TXN_TOPIC, config.int("transaction.state.log.num.partitions"), txn_topic_configs()),
    ]


def on_demand_topics(config) -> list[tuple[str, int, dict[str, str]]]:
    """(name, partitions, configs) of the internal topics created only when first used: a broker whose
    clients never use share groups has no `__share_group_state`."""
    # compacted, never deleted by retention, snapshotted: the configs of __transaction_state
    return [(SHARE_STATE_TOPIC, config.int("share.coordinator.state.topic.num.partitions"), txn_topic_configs())]
