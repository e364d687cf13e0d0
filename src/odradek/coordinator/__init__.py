"""Consumer groups and committed offsets (classic protocol), kept in the internal topic `__consumer_offsets`.

Modules: `group` (one group's state), `group_coordinator` (membership: join/sync/heartbeat/leave, timers),
`offset_manager` (commit/fetch/delete, expiry), `offsets` (the in-memory offset map), `persistence` (the
record format and the log writer/replayer), `timers` (real and fake clocks), `service` (the wiring).
"""

from odradek.coordinator.service import OFFSETS_TOPIC, Coordinator, offsets_topic_configs

__all__ = ["Coordinator", "OFFSETS_TOPIC", "offsets_topic_configs"]
