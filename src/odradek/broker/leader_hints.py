"""Leader hints (KIP-951): a Produce (v10+) or Fetch (v12+) partition refused because this broker does not
lead it (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH) names the leader this broker knows of in
`current_leader`, and the response lists that leader's endpoint in `node_endpoints` (Produce v10+, Fetch
v16+). A client (librdkafka 2.4+, the Java client 3.7+) then moves to the new leader at once instead of
waiting for a Metadata refresh first, which is most of the pause a controlled shutdown would cause it.

A partition with no known leader gets no hint (the client falls back to Metadata).
"""

from __future__ import annotations

from odradek.cluster.metadata import MetadataCache
from odradek.protocol.errors import ErrorCode

LEADERSHIP_ERRORS = frozenset((ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH))


def hint_leader(metadata: MetadataCache, part: dict, topic: str | None, index: int, leaders: set[int]) -> None:
    """Set `part`'s current_leader to the leader the metadata names for topic-index, adding it to `leaders`."""
    info = metadata.partition(topic, index) if topic is not None else None
    if info is None or info.leader < 0:
        return
    part["current_leader"] = {"leader_id": info.leader, "leader_epoch": info.leader_epoch}
    leaders.add(info.leader)


def node_endpoints(metadata: MetadataCache, leaders: set[int], listener: str) -> list[dict]:
    """The `node_endpoints` entries of the hinted leaders this broker has an address for on ``listener``."""
    return [{"node_id": info.node_id, "host": host, "port": port, "rack": info.rack}
            for info, host, port in metadata.endpoints(listener) if info.node_id in leaders]
