"""Authorization parity: the same request, as the same user, to a secured Apache Kafka and a secured odradek
with identical users and ACLs; the outcomes compared.

The cases are in authz_cases.py. Each is (API, variant, version, user): for every API either broker
advertises on its SASL listener (but the login APIs), the lowest, a middle and the highest version both
support (one side's range where only one advertises it, so an unimplemented API shows too), every variant
of the API's body, as admin (a super user), alice and bob, each logged in with SASL/PLAIN on a connection of
their own per broker, reused from case to case (a new one, logged in again, after a broker closed it).

The outcome of a case is what authorization decides, not the data: its error codes at every level, the
names each level lists (a user must not learn a name Kafka would hide), the authorized-operations bit
fields, or `<connection closed>`. It is taken from differential.py's normalised response, keeping only
those fields (`outcome`). Two outcomes differ field by field (differential.diff). A difference is
deliberate when known.py's KNOWN_AUTHZ lists it with its reason; one where odradek allows what Kafka
refuses, or lists a name Kafka does not, never is (`permissive`).

No pytest here: tests/reference/test_authz_differential.py and report_authz.py drive it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from odradek.protocol import codec
from odradek.protocol.errors import ErrorCode

from .authz_cases import ACLS, CASES, EXTRA_VERSIONS, NOT_SENT, PRINCIPALS, TOPICS, USERS, Env
from .differential import (ABSENT, API_NAMES, Broker, Connection, ConnectionClosed, Ctx, Difference, diff, normalise,
                           prune, response_fields, show)
from .known import deliberate_authz

DEADLINE_S = 60.0
DENIALS = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
           ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
           ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, ErrorCode.SASL_AUTHENTICATION_FAILED}
# answers that refuse the request outright: odradek giving one where Kafka gives another is not more lenient
REFUSALS = DENIALS | {ErrorCode.UNSUPPORTED_VERSION, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED}
CLOSED = "<connection closed>"
UNENCODABLE = "<not encodable>"
UNDECODABLE = "<undecodable response>"

API_NAMES = {**API_NAMES, 4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown",
             27: "WriteTxnMarkers", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 34: "AlterReplicaLogDirs",
             35: "DescribeLogDirs", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
             40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 43: "ElectLeaders",
             45: "AlterPartitionReassignments", 46: "ListPartitionReassignments", 48: "DescribeClientQuotas",
             49: "AlterClientQuotas", 50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials",
             55: "DescribeQuorum", 57: "UpdateFeatures", 64: "UnregisterBroker", 68: "ConsumerGroupHeartbeat",
             69: "ConsumerGroupDescribe", 74: "ListConfigResources", 75: "DescribeTopicPartitions",
             76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge",
             81: "RemoveRaftVoter", 83: "InitializeShareGroupState", 84: "ReadShareGroupState",
             85: "WriteShareGroupState", 86: "DeleteShareGroupState", 87: "ReadShareGroupStateSummary",
             88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe",
             90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets"}


# ------------------------------------------------------------------------------------------- sessions

class Session:
    """A connection to a broker's SASL_PLAINTEXT listener, logged in as one user with PLAIN; reopened and
    logged in again when the broker closes it."""

    def __init__(self, bootstrap: str, user: str) -> None:
        self.bootstrap, self.user = bootstrap, user
        self.conn: Connection | None = None

    def _open(self) -> Connection:
        conn = Connection(self.bootstrap, timeout=30.0)
        handshake = conn.request(17, 1, {"mechanism": "PLAIN"})
        if handshake["error_code"]:
            raise RuntimeError(f"{self.bootstrap}: SaslHandshake error {handshake['error_code']}")
        auth = conn.request(36, 2, {"auth_bytes": f"\0{self.user}\0{USERS[self.user]}".encode()})
        if auth["error_code"]:
            raise RuntimeError(f"{self.bootstrap}: {self.user} could not log in: {auth}")
        return conn

    def request(self, api_key: int, version: int, body: dict) -> dict | str:
        """The decoded response, or CLOSED when the broker closed the connection instead of answering."""
        if self.conn is None:
            self.conn = self._open()
        try:
            return self.conn.request(api_key, version, body)
        except codec.DecodeError:  # the frame was read whole: the connection goes on
            return UNDECODABLE
        except (ConnectionClosed, OSError, ValueError):
            self.close()
            return CLOSED

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass
class Side:
    """One secured broker: its sessions per user, the versions it advertises there, its topic ids."""

    name: str
    bootstrap: str
    sessions: dict[str, Session] = field(default_factory=dict)
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    node_id: int = -1
    topic_ids: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sessions = {user: Session(self.bootstrap, user) for user in PRINCIPALS}

    def call(self, user: str, api_key: int, version: int, body: dict) -> dict | str:
        return self.sessions[user].request(api_key, version, body)

    def admin(self, api_key: int, version: int, body: dict) -> dict:
        response = self.call("admin", api_key, version, body)
        if response == CLOSED:
            raise RuntimeError(f"{self.name}: admin's API {api_key} v{version} closed the connection")
        return response

    def close(self) -> None:
        for s in self.sessions.values():
            s.close()


# ---------------------------------------------------------------------------------------------- setup

def until(side: Side, what: str, attempt: Callable[[], Any], deadline: float) -> Any:
    """attempt() repeated until it gives something true, up to the deadline."""
    while True:
        result = attempt()
        if result:
            return result
        if time.monotonic() > deadline:
            raise RuntimeError(f"{side.name}: {what} not reached within {DEADLINE_S:.0f} s")
        time.sleep(0.2)


def probe(side: Side) -> None:
    """As admin: the versions the broker advertises on its SASL listener, and its node id."""
    av = side.admin(18, 3, {"client_software_name": "authz", "client_software_version": "1"})
    side.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in av["api_keys"]}
    side.node_id = side.admin(3, 1, {"topics": []})["brokers"][0]["node_id"]


def prepare(side: Side, extra_topics: list[str]) -> None:
    """As admin: create the topics, install the ACLs, wait until the coordinators answer and alice's view
    of the ACLs is in effect, and learn the topic ids."""
    deadline = time.monotonic() + DEADLINE_S
    names = [*TOPICS, *extra_topics]
    for start in range(0, len(names), 50):
        created = side.admin(19, 5, {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1,
                                                 "assignments": [], "configs": []} for n in names[start:start + 50]],
                                     "timeout_ms": 30000, "validate_only": False})
        bad = [t for t in created["topics"] if t["error_code"] not in (0, ErrorCode.TOPIC_ALREADY_EXISTS)]
        assert not bad, f"{side.name}: CreateTopics {bad}"
    result = side.admin(30, 3, {"creations": ACLS})
    assert all(r["error_code"] == 0 for r in result["results"]), f"{side.name}: CreateAcls {result}"

    def ready() -> bool:
        md = side.admin(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        ids = {t["name"]: t["topic_id"] for t in md["topics"]
               if t["error_code"] == 0 and t["partitions"] and all(p["leader_id"] >= 0 for p in t["partitions"])}
        side.topic_ids = ids
        return all(n in ids for n in names)
    until(side, "topics with leaders", ready, deadline)
    # the ACLs apply (Kafka's authorizer learns them from its metadata log) as alice sees them
    until(side, "ACLs in effect", lambda: {t["name"]: t["error_code"] for t in side.call("alice", 3, 12, {
        "topics": [{"name": "alice-data"}, {"name": "secret"}], "allow_auto_topic_creation": False})["topics"]}
        == {"alice-data": 0, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}, deadline)
    for key_type, key in ((0, "alice-g"), (1, "alice-tx")):
        until(side, f"coordinator of {key}", lambda: side.admin(10, 4, {"key_type": key_type, "coordinator_keys": [
            key]})["coordinators"][0]["error_code"] == 0, deadline)
    until(side, "group coordinator loaded", lambda: side.admin(9, 8, {"groups": [
        {"group_id": "alice-warm", "topics": None}]})["groups"][0]["error_code"] == 0, deadline)
    until(side, "transaction coordinator loaded", lambda: side.admin(22, 4, {
        "transactional_id": "alice-warm", "transaction_timeout_ms": 60000, "producer_id": -1,
        "producer_epoch": -1})["error_code"] == 0, deadline)


# ------------------------------------------------------------------------------------------- outcomes

IDENTITY_FIELDS = {"name", "topic", "topic_name", "partition_index", "partition", "partition_id", "group_id",
                   "member_id", "resource_name", "resource_type", "transactional_id", "node_id", "key",
                   "entity_name", "user"}
SCALAR_NAMES = {"partitions", "partition_indexes", "groups", "group_ids", "transactional_ids"}
OPERATIONS = {"authorized_operations", "topic_authorized_operations", "cluster_authorized_operations"}
DATA = {"configs", "synonyms", "records", "api_keys", "supported_features", "finalized_features", "assignment",
        "protocol_metadata", "member_metadata", "aborted_transactions", "values", "entries", "listeners",
        "endpoints", "acls", "log_dir"}


def keep(key: str) -> bool:
    return key.endswith("error_code") or key in IDENTITY_FIELDS or key in OPERATIONS


def outcome(obj: Any) -> Any:
    """Only what authorization decides: error codes, the names listed, authorized operations."""
    if isinstance(obj, dict):
        out = {}
        for k, val in obj.items():
            if k in DATA:
                continue
            if isinstance(val, list) and val and not any(isinstance(x, (dict, list)) for x in val):
                if k in SCALAR_NAMES:  # lists of numbers are data (replicas, offsets), but partition lists
                    out[k] = val
            elif isinstance(val, (list, dict)):
                out[k] = outcome(val)
            elif keep(k):
                out[k] = val
        return out
    if isinstance(obj, list):
        return [outcome(x) if isinstance(x, (dict, list)) else x for x in obj]
    return obj


def refused(obj: Any) -> bool:
    """Some error code in the outcome is an authorization failure."""
    if isinstance(obj, dict):
        return any((k.endswith("error_code") and v in DENIALS) or refused(v) for k, v in obj.items())
    return isinstance(obj, list) and any(refused(x) for x in obj)


def permissive(d: Difference, odradek_outcome: Any) -> bool:
    """Odradek allows what Kafka refuses: an authorization error answered otherwise, a refused entry left
    out of an answer that refuses nothing, a name or entry Kafka does not list, or operations reported
    authorized that Kafka does not report."""
    if d.path.endswith("error_code") and isinstance(d.kafka, int) and d.kafka in DENIALS:
        return d.odradek not in REFUSALS
    if d.path.endswith("authorized_operations") and isinstance(d.kafka, int) and isinstance(d.odradek, int):
        return d.odradek > 0 and (d.kafka < 0 or bool(d.odradek & ~d.kafka))
    if d.odradek == CLOSED or d.kafka == CLOSED:
        return False
    if d.kafka == ABSENT:
        return True
    # an answer that refuses the request as a whole (a top-level error) need not list what it refused
    refuses = refused(odradek_outcome) or (isinstance(odradek_outcome, dict)
                                           and odradek_outcome.get("error_code") not in (None, 0))
    if d.odradek == ABSENT:
        return refused(d.kafka) and not refuses
    if isinstance(d.kafka, list) and isinstance(d.odradek, list):
        return len(d.odradek) > len(d.kafka) or (refused(d.kafka) and not refuses)
    return False


@dataclass
class AuthzCase:
    api: int
    variant: str
    version: int
    principal: str

    @property
    def api_name(self) -> str:
        return API_NAMES.get(self.api, str(self.api))

    @property
    def id(self) -> str:
        return f"{self.api_name} v{self.version} [{self.variant}] {self.principal}"

    @property
    def tag(self) -> str:
        return f"{self.api}-{self.variant.replace(' ', '_').replace('+', '_')}-{self.version}-{self.principal}"


@dataclass
class AuthzOutcome:
    case: AuthzCase
    kafka: Any
    odradek: Any
    differences: list[Difference]
    known: list[tuple[Difference, str]]

    @property
    def equal(self) -> bool:
        return not self.differences and not self.known

    def permissive(self, d: Difference) -> bool:
        return permissive(d, self.odradek)

    def as_dict(self) -> dict:
        return {"authz": self.case.id, "api": self.case.api, "api_name": self.case.api_name,
                "variant": self.case.variant, "version": self.case.version, "principal": self.case.principal,
                "differences": [[d.path, show(d.path, d.kafka), show(d.path, d.odradek), self.permissive(d)]
                                for d in self.differences],
                "known": [[d.path, show(d.path, d.kafka), show(d.path, d.odradek), reason] for d, reason in self.known],
                "kafka": repr(self.kafka)[:2000], "odradek": repr(self.odradek)[:2000]}


def versions_for(api: int, kafka: Side, odradek: Side) -> list[int]:
    """min, middle and max of the versions both advertise (and the codec knows); of one side's range when
    only one advertises the API."""
    ranges = [s.versions[api] for s in (kafka, odradek) if api in s.versions]
    if not ranges:
        return []
    lo = max(r[0] for r in ranges) if len(ranges) == 2 else ranges[0][0]
    hi = min(r[1] for r in ranges) if len(ranges) == 2 else ranges[0][1]
    try:
        codec_lo, codec_hi = codec.request_versions(api)
    except (KeyError, ValueError):
        return []
    lo, hi = max(lo, codec_lo), min(hi, codec_hi)
    if hi < lo:
        return []
    return sorted({lo, (lo + hi) // 2, hi, *(x for x in EXTRA_VERSIONS.get(api, ()) if lo <= x <= hi)})


def plan(kafka: Side, odradek: Side) -> list[AuthzCase]:
    cases = []
    for api in sorted(set(kafka.versions) | set(odradek.versions)):
        if api in NOT_SENT or api not in CASES:
            continue
        for version in versions_for(api, kafka, odradek):
            for variant in CASES[api]:
                cases += [AuthzCase(api, variant.name, version, p) for p in PRINCIPALS]
    return cases


def per_case_topics(kafka_versions: dict, odradek_versions: dict) -> list[str]:
    """Topics cases destroy (DeleteTopics), to create before the run; from both sides' version ranges."""
    k, o = Side("k", ""), Side("o", "")
    k.versions, o.versions = kafka_versions, odradek_versions
    names = []
    for case in plan(k, o):
        for variant in CASES[case.api]:
            if variant.name == case.variant and variant.per_case_topics is not None:
                names += variant.per_case_topics(case.tag)
    return names


def ask(side: Side, case: AuthzCase) -> Any:
    variant = next(x for x in CASES[case.api] if x.name == case.variant)
    body = variant.body(Env(case.tag, case.principal, case.version, side.topic_ids))
    try:
        response = side.call(case.principal, case.api, case.version, body)
    except codec.EncodeError:
        return UNENCODABLE
    if response in (CLOSED, UNDECODABLE):
        return response
    ctx = Ctx(Broker(side.name, side.bootstrap, side.versions, side.node_id), "")
    ctx.topic_names = {tid: name for name, tid in side.topic_ids.items()}
    return outcome(normalise(ctx, prune(response_fields(case.api), response, case.version)))


def compare_case(case: AuthzCase, kafka: Side, odradek: Side) -> AuthzOutcome:
    k, o = ask(kafka, case), ask(odradek, case)
    differences, known = [], []
    for text_only, d in diff(k, o):
        if text_only:
            continue
        reason = None if permissive(d, o) else deliberate_authz(case.api_name, case.version, case.principal,
                                                             case.variant, d.path)
        (known.append((d, reason)) if reason else differences.append(d))
    return AuthzOutcome(case, k, o, differences, known)


def run_all(kafka: Side, odradek: Side) -> Iterator[AuthzOutcome]:
    for case in plan(kafka, odradek):
        yield compare_case(case, kafka, odradek)
