"""What LeaderAndIsr and UpdateMetadata share: their partition states, ungrouped in early versions and
grouped by topic (with topic ids) in later ones."""

from __future__ import annotations

ZERO_UUID = bytes(16)

TopicStates = list[tuple[str, bytes, list[dict]]]


def states_by_topic(request: dict, grouped: bool, with_ids: bool) -> TopicStates:
    """(topic, topic id, partition states) per topic, whichever form the request version has."""
    if grouped:
        return [(t["topic_name"], t["topic_id"] if with_ids else ZERO_UUID, t["partition_states"])
                for t in request["topic_states"]]
    by_name: dict[str, list] = {}
    for state in request["ungrouped_partition_states"]:
        by_name.setdefault(state["topic_name"], []).append(state)
    return [(name, ZERO_UUID, states) for name, states in by_name.items()]
