"""Differences from Apache Kafka that odradek keeps on purpose, each with its reason (docs/compatibility.md
lists them). A difference a scenario shows is deliberate when its scenario and its path (the scenario's own
topic name written T) match an entry here; a scenario whose only differences are deliberate passes, and the
report counts them apart. Anything else that differs fails its scenario."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

# Kafka 4.x dropped three topic configs of 3.9 and added four; odradek lists 3.9's set
_TOPIC_CONFIG_SET_4X = (r"configs(\[name=|\.)(errors\.deadletterqueue\.group\.enable|max\.decompressed\.message\.bytes|"
                        r"remote\.copy\.lag\.bytes|remote\.copy\.lag\.ms|message\.downconversion\.enable|"
                        r"message\.format\.version|message\.timestamp\.difference\.max\.ms)\]?$")


@dataclass(frozen=True)
class Known:
    scenarios: str  # a glob over scenario ids
    path: str  # a regular expression searched in the difference's path
    reason: str

    def covers(self, scenario: str, path: str) -> bool:
        return fnmatch.fnmatchcase(scenario, self.scenarios) and re.search(self.path, path) is not None


KNOWN = [
    Known("metadata-unknown-topic-auto-create", r".", "a single node creates an auto-created topic before it "
          "answers, so the first Metadata lists it ready; Kafka's controller creates it asynchronously and answers "
          "UNKNOWN_TOPIC_OR_PARTITION first (clients ask again either way)"),
    Known("*", _TOPIC_CONFIG_SET_4X, "odradek lists Kafka 3.9's topic configs, the release whose API versions it "
          "advertises; Kafka 4 dropped message.downconversion.enable, message.format.version and "
          "message.timestamp.difference.max.ms and added four configs of features odradek does not have"),
    Known("*", r"configs(\[name=|\.)message\.timestamp\.after\.max\.ms\]?\.value$", "Kafka 4 changed the default "
          "from Long.MAX_VALUE to one hour (KIP-937); odradek keeps 3.9's"),
    Known("*", r"min\.insync\.replicas\]?\.config_source$", "the reference's storage format records "
          "min.insync.replicas as a cluster-wide dynamic config (source 3); odradek's is the static default (5)"),
    Known("offset-commit-unknown-group-with-member", r"error_code$", "3.9's classic group coordinator answers "
          "ILLEGAL_GENERATION to a commit with a generation for a group that does not exist; Kafka 4's new "
          "coordinator answers GROUP_ID_NOT_FOUND"),
    Known("sg-heartbeat-join-copartition-index-out-of-range", r"^error_code$", "a copartition group naming a source "
          "topic index the subtopology does not have: Kafka 4.4 fails with an internal error (UNKNOWN_SERVER_ERROR); "
          "odradek refuses the topology (STREAMS_INVALID_TOPOLOGY)"),
    Known("sg-heartbeat-join-duplicate-subtopology", r"^error_code$", "two subtopologies with one id: Kafka 4.4 "
          "fails with an internal error (UNKNOWN_SERVER_ERROR); odradek refuses the topology "
          "(STREAMS_INVALID_TOPOLOGY)"),
]


KNOWN += [
    Known("cg-heartbeat-unknown-group", r"error_code$|error_message", "a member whose group the coordinator does not know "
          "(its last state lost in a crash, or the group deleted) is told UNKNOWN_MEMBER_ID so that it rejoins; "
          "Kafka answers GROUP_ID_NOT_FOUND (docs/consumer-groups.md)"),
]


KNOWN += [
    Known("share-fetch-v2-unknown-acquire-mode", r"^error_code$", "Kafka 4.4 fails a ShareFetch v2 with an unknown "
          "ShareAcquireMode with UNKNOWN_SERVER_ERROR (the mode's lookup throws); odradek answers INVALID_REQUEST"),
    Known("share-alter-offsets-negative", r"error_code$", "Kafka 4.4 stores a negative start offset given to "
          "AlterShareGroupOffsets; odradek refuses it with INVALID_REQUEST (no offset is below 0, and -1 means "
          "'not initialized' in the share coordinator's state)"),
]


def deliberate(scenario: str, path: str) -> str | None:
    """The reason a difference at ``path`` is deliberate, or None."""
    for known in KNOWN:
        if known.covers(scenario, path):
            return known.reason
    return None


# ------------------------------------------------------------------------------ authorization parity

@dataclass(frozen=True)
class KnownAuthz:
    """A deliberate difference of the authorization parity suite (authz.py): an API (its name, a glob), a
    version range, users (a glob) and a regular expression searched in the difference's path. Never one where
    odradek allows what Kafka refuses or lists a name Kafka hides: authz.py does not even look those up."""

    api: str
    path: str
    reason: str
    versions: tuple[int, int] = (0, 1 << 15)
    principals: str = "*"
    variant: str = "*"

    def covers(self, api: str, version: int, principal: str, variant: str, path: str) -> bool:
        return (fnmatch.fnmatchcase(api, self.api) and self.versions[0] <= version <= self.versions[1]
                and fnmatch.fnmatchcase(principal, self.principals) and fnmatch.fnmatchcase(variant, self.variant)
                and re.search(self.path, path) is not None)


KNOWN_AUTHZ: list[KnownAuthz] = [
    KnownAuthz("Produce", r"^\.$", "Kafka 4 still advertises Produce v0-2 (librdkafka's compressed produce "
               "needs v0 advertised, KAFKA-18659) but refuses them; odradek serves them, authorized as every version",
               versions=(0, 2)),
    *(KnownAuthz(api, r"^\.$", "ZooKeeper-mode inter-broker APIs Kafka 4 removed (it closes the connection); "
                 "odradek's cluster mode uses them, and refuses them CLUSTER_AUTHORIZATION_FAILED to all but super "
                 "users and brokers")
      for api in ("LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown")),
    *(KnownAuthz(api, r"^\.$", "KRaft's own APIs (the quorum, broker registration): odradek has no KRaft quorum "
                 "or controller (a single node, or brokers coordinated by ZooKeeper) and does not advertise them")
      for api in ("DescribeQuorum", "UnregisterBroker", "RemoveRaftVoter")),
    KnownAuthz("DescribeUserScramCredentials", r"^\.$|^results$", "refused to a principal without DESCRIBE on "
               "the cluster, Kafka 4.4 closes the connection when all users were asked for (`users` null: its error "
               "answer is built from the list) and lists one result without a user name per user named otherwise; "
               "odradek answers CLUSTER_AUTHORIZATION_FAILED with no results", principals="bob"),
    KnownAuthz("ShareFetch", r"^error_code$|^responses", "odradek answers a ShareFetch from a member its share "
               "group does not have UNKNOWN_MEMBER_ID before it looks at the partitions (k78_share_fetch.py); "
               "Kafka 4.4 opens the share session and answers per partition", principals="a*"),
    *(KnownAuthz(api, r"error_code$", "an inter-broker API of the share coordinator, sent as a super user: "
                 "Kafka's share coordinator answers NOT_COORDINATOR until its state topic exists, odradek's "
                 "coordinator is always local and answers the request", principals="admin")
      for api in ("InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
                  "DeleteShareGroupState", "ReadShareGroupStateSummary")),
    KnownAuthz("DeleteShareGroupOffsets", r"^responses\[topic_name=[^]]+\]\.error_code$", "a topic whose state "
               "the group no longer has (deleted earlier) answers NONE: odradek's coordinator does not keep the list "
               "of a share group's initialized partitions (docs/share-groups.md, limits and gaps); Kafka answers "
               "UNKNOWN_TOPIC_OR_PARTITION", principals="alice"),
]


def deliberate_authz(api: str, version: int, principal: str, variant: str, path: str) -> str | None:
    """The reason an authorization difference is deliberate, or None."""
    for known in KNOWN_AUTHZ:
        if known.covers(api, version, principal, variant, path):
            return known.reason
    return None
