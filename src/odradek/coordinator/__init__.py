"""Consumer groups and committed offsets (classic protocol), kept in the internal topic `__consumer_offsets`,
and transactions, kept in `__transaction_state`.

Modules: `group` (one group's state), `group_coordinator` (membership: join/sync/heartbeat/leave, timers),
`offset_manager` (commit/fetch/delete, expiry), `offsets` (the in-memory offset map), `persistence` (the
record format and the log writer/replayer), `timers` (real and fake clocks), `service` (the wiring),
`transactions` and `txn_state` (the transaction coordinator), `producer_ids` (producer id allocation).
"""

from odradek.coordinator.service import OFFSETS_TOPIC, Coordinator, offsets_topic_configs
from odradek.coordinator.transactions import TXN_TOPIC, txn_topic_configs

__all__ = ["Coordinator", "OFFSETS_TOPIC", "TXN_TOPIC", "internal_topics", "offsets_topic_configs"]


def internal_topics(config) -> list[tuple[str, int, dict[str, str]]]:
    """(name, partitions, configs) of the internal topics, as they are created."""
    return [
        (OFFSETS_TOPIC, config.int("offsets.topic.num.partitions"), offsets_topic_configs(config)),
        (TXN_TOPIC, config.int("transaction.state.log.num.partitions"), txn_topic_configs()),
    ]
