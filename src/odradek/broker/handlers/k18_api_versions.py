"""ApiVersions (key 18), versions 0-4.

Advertises exactly the registry's ranges (see broker/registry.py). A version we do not speak never reaches
this handler: the dispatcher answers it with UNSUPPORTED_VERSION and a v0 body (KIP-511) listing only
ApiVersions' own range, as Kafka does, which is what clients parse to step down. The response always goes out
with response header v0, even at v3+ (the codec applies that rule).

From v3 the response carries Kafka's features (KIP-584), supported and finalized at the same level, since
odradek cannot switch a protocol on or off at run time (UpdateFeatures, k57, refuses any change of level).
`kafka-features describe` prints them. Each is claimed at the level odradek implements, read against what the
level means in Kafka 4.4 (server-common's `*Version` enums):

* `metadata.version`: in Kafka it versions the KRaft metadata log and, with it, which inter-broker and admin
  request versions a cluster may use. A ZooKeeper-mode odradek has no metadata log, so the level says which
  Kafka release's request versions it matches: the highest level whose request versions the registry serves
  (`metadata_version_level`, from the table METADATA_VERSIONS). With Fetch 17, ListOffsets 11 and
  DescribeLogDirs 5 that is 4.1-IV0 (level 26): 4.0-IV3 brings ListOffsets 10, 4.1-IV1 Fetch 18 (not served),
  4.2-IV1 ListOffsets 11, 4.3-IV0 cordoned log dirs (DescribeLogDirs 5); 4.4-IV1 (CIDR ACLs) and 4.4-IV2
  (controller unregistration) are not reached. 4.0-IV2 is also the level at which Kafka switches `transaction.version` 2
  on, and above 4.0-IV0, where it switches `group.version` 1 on. Supported from 3.3-IV3 (level 7), Kafka's
  oldest, so that tools print the range as versions.
* `transaction.version` 2: KIP-890's transactions v2 (KIP-1022), from which current clients know to send
  Produce v12, EndTxn v5 and TxnOffsetCommit v5 and to skip AddPartitionsToTxn and AddOffsetsToTxn.
* `group.version` 1: the consumer group protocol of KIP-848 (ConsumerGroupHeartbeat), which admin tools
  check before using it.
* `share.version` 1: share groups (KIP-932: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and the share
  state APIs). Level 2 is KIP-1191's dead-letter queue for share groups, which odradek does not have.
* `streams.version` 1: KIP-1071's streams group protocol (StreamsGroupHeartbeat, StreamsGroupDescribe), the
  level Kafka 4.4 finalizes.

Left out, as odradek has no such thing: `kraft.version` (the KRaft quorum's own version; a ZooKeeper cluster
has none), `eligible.leader.replicas.version` (KIP-966's ELR, kept by KRaft's controller; DescribeTopicPartitions
answers empty lists).
"""

from typing import Mapping

from odradek.broker.context import RequestContext
from odradek.broker.registry import HANDLERS, advertised_versions, handler
from odradek.protocol.api_keys import ApiKey


TRANSACTION_VERSION = 2
GROUP_VERSION = 1
SHARE_VERSION = 1
STREAMS_VERSION = 1
METADATA_VERSION_MIN = 7  # 3.3-IV3, the oldest metadata.version Kafka 4.4 knows
# Kafka 4.4's metadata.version levels from 4.0 on, with the request versions each one brings (the rest of a
# level is KRaft's metadata records): (level, name, {api key: the version the level needs}). Each level
# needs what the levels before it need.
METADATA_VERSIONS: tuple[tuple[int, str, dict[int, int]], ...] = (
    (22, "4.0-IV0", {ApiKey.FETCH: 17, ApiKey.LIST_OFFSETS: 9}),
    (23, "4.0-IV1", {}),  # ELR records in the metadata log, switched on by eligible.leader.replicas.version
    (24, "4.0-IV2", {}),  # where transaction.version 2 becomes the default
    (25, "4.0-IV3", {ApiKey.LIST_OFFSETS: 10}),
    (26, "4.1-IV0", {}),
    (27, "4.1-IV1", {ApiKey.FETCH: 18}),
    (28, "4.2-IV0", {}),
    (29, "4.2-IV1", {ApiKey.LIST_OFFSETS: 11}),
    (30, "4.3-IV0", {ApiKey.DESCRIBE_LOG_DIRS: 5}),  # cordoned log dirs
    (31, "4.4-IV0", {}),
)
# 4.4-IV1 (32) needs CIDR ranges in ACL hosts, which odradek's authorizer does not match: never reached.


def metadata_version_level(served: Mapping[int, int] | None = None) -> int:
    """The highest level of METADATA_VERSIONS whose request versions are served (`served`: api key -> highest
    version; default: the registry's); 21 (3.9-IV0) if not even 4.0-IV0's are."""
    if served is None:
        served = {key: spec.max_version for key, spec in HANDLERS.items()}
    level = 21
    for candidate, _, needs in METADATA_VERSIONS:
        if any(served.get(key, -1) < version for key, version in needs.items()):
            break
        level = candidate
    return level


def metadata_version_name(level: int) -> str:
    """Kafka's name of a metadata.version level of METADATA_VERSIONS ("4.0-IV2")."""
    return {21: "3.9-IV0", **{lvl: name for lvl, name, _ in METADATA_VERSIONS}}[level]


def supported_features() -> list[dict]:
    """(name, min, max) of every feature odradek implements, by name (once per ApiVersions: the registry is
    complete by then)."""
    return [{"name": "group.version", "min_version": 0, "max_version": GROUP_VERSION},
            {"name": "metadata.version", "min_version": METADATA_VERSION_MIN, "max_version": metadata_version_level()},
            {"name": "share.version", "min_version": 0, "max_version": SHARE_VERSION},
            {"name": "streams.version", "min_version": 0, "max_version": STREAMS_VERSION},
            {"name": "transaction.version", "min_version": 0, "max_version": TRANSACTION_VERSION}]


def finalized_features() -> list[dict]:
    """Every supported feature finalized at its highest level."""
    return [{"name": f["name"], "min_version_level": f["max_version"], "max_version_level": f["max_version"]}
            for f in supported_features()]


FINALIZED_FEATURES_EPOCH = 0  # they never change


@handler(ApiKey.API_VERSIONS, 0, 4)
def api_versions(ctx: RequestContext, request: dict) -> dict:
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised_versions()],
        "throttle_time_ms": 0,
        "supported_features": supported_features(),
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": finalized_features(),
    }
