"""Every ZooKeeper path odradek uses and the JSON stored at it: Kafka's own ZooKeeper layout (as written by
Kafka 2.x/3.x in ZooKeeper mode), so Kafka's ZooKeeper tooling can read a cluster of ours. Nothing else in
the project builds a path or parses a znode.

    /cluster/id                                  {"version": "1", "id": CLUSTER_ID}
    /controller                       ephemeral  {"version": 1, "brokerid": ID, "timestamp": "MS"}
    /controller_epoch                            decimal integer
    /brokers/ids/ID                   ephemeral  {"version": 5, "host", "port", "endpoints": ["PLAINTEXT://h:p"],
                                                  "listener_security_protocol_map": {...}, "jmx_port": -1,
                                                  "rack"?, "timestamp": "MS", "features": {}}
                                                 (the znode's czxid is the broker epoch)
    /brokers/topics/TOPIC                        {"version": 3, "topic_id": BASE64, "partitions": {"0": [1, 2, 3]},
                                                  "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}}
                                                 (the last two name partitions being reassigned only)
    /brokers/topics/TOPIC/partitions/P/state     {"version": 1, "leader", "leader_epoch", "isr": [...],
                                                  "controller_epoch"}  (its znode version is the partition epoch;
                                                  version 2 adds "leader_recovery_state" when it is not 0)
    /config/topics/TOPIC                         {"version": 1, "config": {NAME: VALUE}}
    /config/brokers/ID (or <default>)            {"version": 1, "config": {NAME: VALUE}}  (dynamic broker configs)
    /config/users/USER (URL-encoded)             {"version": 1, "config": {"SCRAM-SHA-512": "salt=...,...",
                                                  "producer_byte_rate": "1048576"}}  (credentials, quotas)
    /config/users/USER/clients/CLIENT            {"version": 1, "config": {"consumer_byte_rate": "..."}}
    /config/clients/CLIENT                       likewise (USER, CLIENT URL-encoded, or <default>)
    /config/changes/config_change_SEQ            {"version": 2, "entity_path": "topics/TOPIC" or "brokers/ID"}
    /admin/delete_topics/TOPIC                   (empty: a deletion request)
    /isr_change_notification/isr_change_SEQ      {"version": 1, "partitions": [{"topic", "partition"}]}
    /latest_producer_id_block                    {"version": 1, "broker": ID, "block_start": "N", "block_end": "M"}

All paths are relative to the chroot of `zookeeper.connect` (`host:port/odradek`); kazoo applies it.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from odradek.security.quotas import DEFAULT, DefaultName, QuotaEntity

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
BROKER_CONFIGS = "/config/brokers"
USER_CONFIGS = "/config/users"
CLIENT_CONFIGS = "/config/clients"
QUOTA_DEFAULT = "<default>"  # the default user or client id of a quota entity
BROKER_DEFAULT_ENTITY = "<default>"  # the entity name of the cluster-wide dynamic broker defaults
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Created (empty) by the first broker of a cluster, as Kafka's persistent paths are.
PERSISTENT_PATHS = (BROKER_IDS, TOPICS, TOPIC_CONFIGS, CONFIG_CHANGES, DELETE_TOPICS, ISR_CHANGES,
                    "/brokers/seqid", "/admin", "/config/brokers", "/config/clients", "/config/users")


def _dump(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(data: bytes) -> dict:
    return json.loads(data.decode())


def _now_ms() -> str:
    return str(time.time_ns() // 1_000_000)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def broker_config_path(entity: str) -> str:
    """``entity``: a broker id, or BROKER_DEFAULT_ENTITY."""
    return f"{BROKER_CONFIGS}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -- /cluster/id ------------------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _load(data)["id"]


# -- /controller, /controller_epoch -----------------------------------------------------------------------


def encode_controller(broker_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def decode_controller(data: bytes) -> int:
    return int(_load(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# -- /brokers/ids/ID --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    epoch: int = -1  # the registration znode's czxid (not stored in the JSON)

    def endpoint(self, listener: str | None = None) -> Endpoint:
        """The endpoint of ``listener`` (None: the first one)."""
        for endpoint in self.endpoints:
            if listener is None or endpoint.listener == listener:
                return endpoint
        raise KeyError(f"broker {self.broker_id} has no listener {listener}")

    def has_listener(self, listener: str) -> bool:
        return any(endpoint.listener == listener for endpoint in self.endpoints)


def encode_broker(reg: BrokerRegistration) -> bytes:
    plaintext = next((e for e in reg.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, object] = {
        "version": 5,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [e.connection_string() for e in reg.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in reg.endpoints},
        "jmx_port": -1,
        "timestamp": _now_ms(),
        "features": {},
    }
    if reg.rack is not None:
        value["rack"] = reg.rack
    return _dump(value)


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    value = _load(data)
    protocols = value.get("listener_security_protocol_map") or {}
    endpoints = []
    for text in value.get("endpoints") or []:
        listener, _, address = text.partition("://")
        host, _, port = address.rpartition(":")
        endpoints.append(Endpoint(listener, host.strip("[]"), int(port), protocols.get(listener, listener)))
    if not endpoints and value.get("host"):
        endpoints.append(Endpoint("PLAINTEXT", value["host"], int(value["port"])))
    return BrokerRegistration(broker_id, tuple(endpoints), value.get("rack"), epoch)


# -- /brokers/topics/TOPIC --------------------------------------------------------------------------------


@dataclass
class TopicAssignment:
    """A topic's replica assignment. While a partition is being reassigned (KIP-455) its replicas are the
    union of the target and the original replicas (target first), ``adding`` holds the target replicas that
    are new and ``removing`` the original ones that are going; both are empty (absent) otherwise."""

    topic_id: bytes
    partitions: dict[int, list[int]]  # partition -> replicas, the first being the preferred leader
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def reassigning(self, partition: int) -> bool:
        return bool(self.adding.get(partition) or self.removing.get(partition))

    def target(self, partition: int) -> list[int]:
        """The replicas the partition ends up with (its replicas when it is not being reassigned)."""
        removing = self.removing.get(partition, [])
        return [r for r in self.partitions.get(partition, []) if r not in removing]

    def original(self, partition: int) -> list[int]:
        """The replicas the partition had before its reassignment started."""
        adding = self.adding.get(partition, [])
        return [r for r in self.partitions.get(partition, []) if r not in adding]


def encode_topic_id(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


def decode_topic_id(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode_topic(assignment: TopicAssignment) -> bytes:
    return _dump({
        "version": 3,
        "topic_id": encode_topic_id(assignment.topic_id),
        "partitions": {str(p): replicas for p, replicas in sorted(assignment.partitions.items())},
        "adding_replicas": {str(p): r for p, r in sorted(assignment.adding.items()) if r},
        "removing_replicas": {str(p): r for p, r in sorted(assignment.removing.items()) if r},
    })


def decode_topic(data: bytes) -> TopicAssignment:
    """An empty or unreadable znode reads as a topic without partitions (as Kafka reads it)."""
    try:
        value = _load(data) if data else {}
    except ValueError:
        value = {}
    topic_id = decode_topic_id(value["topic_id"]) if value.get("topic_id") else bytes(16)
    partitions = {int(p): [int(b) for b in replicas] for p, replicas in (value.get("partitions") or {}).items()}
    adding, removing = ({int(p): [int(b) for b in replicas] for p, replicas in (value.get(key) or {}).items() if replicas}
                        for key in ("adding_replicas", "removing_replicas"))
    return TopicAssignment(topic_id, partitions, adding, removing)


# -- /brokers/topics/TOPIC/partitions/P/state -------------------------------------------------------------


@dataclass
class PartitionState:
    """A partition's leader, leader epoch and ISR as the controller (or, for the ISR, the leader) last
    wrote them. ``zk_version`` is the znode's version, the "partition epoch" of LeaderAndIsr: every
    write is conditional on it."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1
    leader_recovery_state: int = 0

    def copy(self, **changes: object) -> "PartitionState":
        state = PartitionState(self.leader, self.leader_epoch, list(self.isr), self.controller_epoch,
                               self.zk_version, self.leader_recovery_state)
        for key, value in changes.items():
            setattr(state, key, value)
        return state


def encode_partition_state(state: PartitionState) -> bytes:
    value: dict[str, object] = {"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                                "controller_epoch": state.controller_epoch, "isr": list(state.isr)}
    if state.leader_recovery_state:  # version 2 (Kafka 3.2+) carries it when it is not RECOVERED (0)
        value.update(version=2, leader_recovery_state=state.leader_recovery_state)
    return _dump(value)


def decode_partition_state(data: bytes, zk_version: int) -> PartitionState:
    value = _load(data)
    return PartitionState(int(value["leader"]), int(value["leader_epoch"]), [int(b) for b in value["isr"]],
                          int(value["controller_epoch"]), zk_version, int(value.get("leader_recovery_state", 0)))


# -- /config/topics/TOPIC and /config/changes -------------------------------------------------------------


def encode_topic_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(sorted(configs.items()))})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in (_load(data).get("config") or {}).items()}


def encode_config_change(topic: str, kind: str = "topics") -> bytes:
    return _dump({"version": 2, "entity_path": f"{kind}/{topic}"})


def decode_config_change(data: bytes) -> tuple[str, str] | None:
    """(entity type, entity name) of a change notification, e.g. ("topics", "clicks")."""
    value = _load(data)
    if value.get("version") == 2:
        kind, _, name = str(value.get("entity_path", "")).partition("/")
        return (kind, name) if name else None
    if "entity_type" in value:  # version 1
        return str(value["entity_type"]), str(value["entity_name"])
    return None


def user_config_path(user: str) -> str:
    """/config/users/<user>, the name URL-encoded as Kafka's Sanitizer writes it."""
    return f"{USER_CONFIGS}/{quote(user, safe='')}"


def user_from_entity(name: str) -> str | None:
    """The user of a `users/<name>` entity (None for `users/<name>/clients/<id>`, a quota entity)."""
    return None if "/" in name else unquote(name)


def _quota_segment(name: str | DefaultName) -> str:
    return QUOTA_DEFAULT if name is DEFAULT else quote(name, safe="")


def _quota_name(segment: str) -> str | DefaultName:
    return DEFAULT if segment == QUOTA_DEFAULT else unquote(segment)


def quota_entity_path(entity: QuotaEntity) -> str:
    """`users/U`, `users/U/clients/C` or `clients/C`: where a quota entity's configs live under /config, as
    change notifications name it."""
    if entity.user is not None and entity.client_id is not None:
        return f"users/{_quota_segment(entity.user)}/clients/{_quota_segment(entity.client_id)}"
    if entity.user is not None:
        return f"users/{_quota_segment(entity.user)}"
    return f"clients/{_quota_segment(entity.client_id)}"


def quota_entity_of(entity_path: str) -> QuotaEntity | None:
    """The quota entity an entity path names (see `quota_entity_path`); None if it names none."""
    parts = entity_path.split("/")
    if len(parts) == 2 and parts[0] == "users":
        return QuotaEntity(_quota_name(parts[1]), None)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return QuotaEntity(_quota_name(parts[1]), _quota_name(parts[3]))
    if len(parts) == 2 and parts[0] == "clients":
        return QuotaEntity(None, _quota_name(parts[1]))
    return None


# -- /isr_change_notification -----------------------------------------------------------------------------


def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(data: bytes) -> list[tuple[str, int]]:
    return [(str(e["topic"]), int(e["partition"])) for e in _load(data).get("partitions", [])]


# -- /latest_producer_id_block ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    start: int
    end: int  # inclusive, as Kafka stores it

    @property
    def size(self) -> int:
        return self.end - self.start + 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump({"version": 1, "broker": block.broker_id, "block_start": str(block.start),
                  "block_end": str(block.end)})


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    value = _load(data)
    return ProducerIdBlock(int(value["broker"]), int(value["block_start"]), int(value["block_end"]))


@dataclass
class ClusterSnapshot:
    """What a new controller reads from ZooKeeper to rebuild its view (controller/context.py)."""

    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
