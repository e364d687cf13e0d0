"""Share groups (KIP-932) for `odradek groups` and the console: listed with ListGroups (type filter `share`),
described with ShareGroupDescribe and DescribeShareGroupOffsets at the group's coordinator.

confluent-kafka's AdminClient has no share-group calls (its list_consumer_groups leaves share groups out), so
these go through the tools' own blocking client (tools/wire.py). Per partition a share group has a
*start offset* (everything below it is acknowledged or archived) and a *lag*: the records below the high
watermark not finished yet, in flight or never delivered, as Kafka's kafka-share-groups.sh shows them
(START-OFFSET, LAG). The lag needs DescribeShareGroupOffsets v1 (Kafka 4.2+, KIP-1226); against an older
broker it is unknown (None).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, error_name
from odradek.tools.common import ToolError
from odradek.tools.wire import BrokerConnection, coordinator_connection

SHARE_TYPE = "share"
LIST_GROUPS_WITH_TYPES = 5  # ListGroups v5 (KIP-848) carries the group type and takes a type filter
SHARE_DESCRIBE_STABLE = 1  # v0 was Kafka 4.0's early access; 4.1+ brokers serve v1


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    subscribed: list[str]
    assignment: list[tuple[str, int]]  # sorted


@dataclass
class SharePartition:
    start_offset: int | None  # None: the group has no state for the partition yet
    lag: int | None  # None: unknown (no state, or a broker before DescribeShareGroupOffsets v1)
    error: str | None = None


@dataclass
class ShareGroupState:
    """A share group as `groups describe` and the console show it."""

    group: str
    state: str  # upper case, as the consumer groups' states show: STABLE, EMPTY
    group_epoch: int
    assignor: str | None
    coordinator: str  # host:port
    members: list[ShareMember] = field(default_factory=list)
    partitions: dict[tuple[str, int], SharePartition] = field(default_factory=dict)

    def owners(self, tp: tuple[str, int]) -> list[str]:
        """The members assigned `tp` (a share group may give a partition to several)."""
        return [m.member_id for m in self.members if tp in m.assignment]


def list_share_groups(brokers: list[tuple[str, int]], config: dict[str, Any],
                      timeout: float) -> dict[str, str]:
    """group id -> state of the share groups of every broker (each lists the groups it coordinates). A broker
    without ListGroups v5 has no share groups; Unsupported if the connection settings need what the tools'
    client lacks."""
    found: dict[str, str] = {}
    for host, port in brokers:
        with BrokerConnection(host, port, config, timeout) as conn:
            version = conn.highest(ApiKey.LIST_GROUPS, LIST_GROUPS_WITH_TYPES)
            if version is None:
                continue
            answer = conn.request(ApiKey.LIST_GROUPS, version, {"states_filter": [], "types_filter": [SHARE_TYPE]})
            if answer["error_code"]:
                raise ToolError(f"list groups at {host}:{port}: {error_name(answer['error_code'])}")
            for g in answer["groups"]:
                if g["group_type"].lower() == SHARE_TYPE:
                    found[g["group_id"]] = g["group_state"].upper()
    return found


def describe_share_group(bootstrap: str, config: dict[str, Any], group: str,
                         timeout: float) -> ShareGroupState | None:
    """The share group `group` with its members and per-partition offsets; None when it is not a share group
    (or the cluster has no share groups). Unsupported if the connection settings need what the tools' client
    lacks; ToolError for other failures."""
    with coordinator_connection(bootstrap, config, group, timeout) as conn:
        version = conn.highest(ApiKey.SHARE_GROUP_DESCRIBE, SHARE_DESCRIBE_STABLE)
        if version is None:
            return None  # a broker before share groups: no group can be one
        answer = conn.request(ApiKey.SHARE_GROUP_DESCRIBE, version,
                              {"group_ids": [group], "include_authorized_operations": False})
        described = answer["groups"][0]
        if described["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
            return None  # unknown, or a classic or consumer group
        if described["error_code"]:
            raise ToolError(f"describe {group}: {error_name(described['error_code'])}"
                            + (f" ({described['error_message']})" if described.get("error_message") else ""))
        state = ShareGroupState(group, described["group_state"].upper(), described["group_epoch"],
                                described["assignor_name"] or None, f"{conn.host}:{conn.port}")
        for m in described["members"]:
            assignment = sorted((tp["topic_name"], p) for tp in m["assignment"]["topic_partitions"]
                                for p in tp["partitions"])
            state.members.append(ShareMember(m["member_id"], m["client_id"], m["client_host"], m["member_epoch"],
                                             sorted(m["subscribed_topic_names"]), assignment))
        state.members.sort(key=lambda m: m.member_id)
        state.partitions = _share_offsets(conn, group)
        for member in state.members:  # assigned partitions without state yet are shown too
            for tp in member.assignment:
                state.partitions.setdefault(tp, SharePartition(None, None))
        state.partitions = dict(sorted(state.partitions.items()))
        return state


def _share_offsets(conn: BrokerConnection, group: str) -> dict[tuple[str, int], SharePartition]:
    """Start offset and lag of every partition the group has state for (DescribeShareGroupOffsets with no
    topics named); empty against a broker without the API."""
    version = conn.highest(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
    if version is None:
        return {}
    answer = conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version,
                          {"groups": [{"group_id": group, "topics": None}]})
    found = answer["groups"][0] if answer["groups"] else {"error_code": 0, "topics": []}
    if found["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
        return {}  # members but no state yet
    if found["error_code"]:
        raise ToolError(f"offsets of {group}: {error_name(found['error_code'])}")
    out = {}
    for topic in found["topics"]:
        for p in topic["partitions"]:
            start = p["start_offset"] if p["start_offset"] >= 0 else None
            lag = p.get("lag", -1)
            out[(topic["topic_name"], p["partition_index"])] = SharePartition(
                start, lag if lag >= 0 and start is not None else None,
                error_name(p["error_code"]) if p["error_code"] else None)
    return out
