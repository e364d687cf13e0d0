"""ShareGroupCoordinator: share groups (KIP-932) — membership, share sessions, per-partition delivery state.

Membership (ShareGroupHeartbeat): a member joins with epoch 0 and its subscribed topic names, heartbeats
with its epoch, leaves with -1. Share groups share partitions, so there is nothing to revoke: every member is
assigned every partition of the topics it subscribes to, and the records themselves are what is divided
(each handed to one member at a time, see share_partition.py). The group epoch goes up when a member joins,
leaves or changes its subscription, or a subscribed topic appears or grows; a member's epoch is the group
epoch its current assignment was made at, and its assignment is sent when it joins or changes. A member
that sends no heartbeat within `group.share.session.timeout.ms` is removed; whatever records it holds are
released at once. One that leaves keeps its share session and records until it closes the session (a
closing client's last acknowledgements may come after its leave heartbeat) or their locks run out.

Share sessions (ShareFetch/ShareAcknowledge): one per (group, member). Epoch 0 opens one (replacing an old
one), -1 closes it (releasing the member's records), any other epoch must be the one expected next
(INVALID_SHARE_SESSION_EPOCH), on a session that exists (SHARE_SESSION_NOT_FOUND); each request moves it on.
The session remembers the partitions named so far, less those forgotten.

Delivery state: one `SharePartition` per (group, topic id, partition) led here, kept by this broker as the
partition's leader. On first use it is read from the key's share coordinator through `persister`
(share_coordinator.py: this broker's own, or another broker's in a cluster), or created at the group's
`share.auto.offset.reset` when nothing is stored (latest: the high watermark; earliest: the log start;
by_duration:D the first record with a timestamp at most D old, else the high watermark). Whenever it
changes (a new window, acquisition of new records, acknowledgements, releases, expired locks) the whole
window is written back, so acknowledged records stay acknowledged and unfinished ones come back AVAILABLE
(with their delivery counts) after a restart, a kill -9 or a failover. Acknowledgements are answered only once
their state is durable. When the partition's leadership moves, its windows are dropped here
(`forget_partition`) and the new leader reads them.

Group configs (DescribeConfigs/IncrementalAlterConfigs on GROUP resources) live here too, stored in the
group's partition of `__consumer_offsets` (GroupConfigKey).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from odradek.coordinator.persistence import encode_group_config_value, encode_share_state_value, group_config_key
from odradek.coordinator.share_coordinator import UNINITIALIZED, StatePersister, StoredState
from odradek.coordinator.share_partition import ACQUIRED, SharePartition
from odradek.coordinator.share_state import StateKey
from odradek.coordinator.timers import Scheduler
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.cluster.metadata import MetadataCache

log = logging.getLogger(__name__)

TopicPartition = tuple[bytes, int]  # (topic id, partition)
LEAVE_EPOCH = -1
FINAL_SESSION_EPOCH = -1
INITIAL_SESSION_EPOCH = 0


def _one_of(*choices: str) -> Callable[[str], bool]:
    return lambda v: v in choices


def _positive_int(v: str) -> bool:
    # Kafka's INT: at most 2^31-1 (and a bounded length before int(), which refuses 4300+ digits)
    return v.isascii() and v.isdigit() and len(v) <= 10 and 0 < int(v) < 2**31


BY_DURATION = "by_duration:"
# Java's Duration text as Kafka's `by_duration:` takes it: PnDTnHnMn.nS (days, hours, minutes, seconds)
_ISO_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def iso_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration such as P1DT2H30M or PT0.5S; ValueError when it is not one."""
    match = _ISO_DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def _offset_reset(v: str) -> bool:
    if v in ("latest", "earliest"):
        return True
    if not v.startswith(BY_DURATION):
        return False
    try:
        iso_duration_ms(v[len(BY_DURATION):])
    except ValueError:
        return False
    return True


# Group configs (Kafka's GroupConfig names): name -> (validator, broker property giving the default or a fixed
# default, documentation for DescribeConfigs)
GROUP_CONFIGS: dict[str, tuple[Callable[[str], bool], str, str]] = {
    "share.auto.offset.reset": (_offset_reset, "latest",
                                "Where a share group starts reading a partition it has no state for: latest, "
                                "earliest, or by_duration:<ISO-8601 duration> (the first record that recent)."),
    "share.isolation.level": (_one_of("read_uncommitted", "read_committed"), "read_uncommitted",
                              "Whether a share group's members get records of open and aborted transactions "
                              "(read_uncommitted) or only committed ones (read_committed)."),
    "share.record.lock.duration.ms": (_positive_int, "group.share.record.lock.duration.ms",
                                      "How long a member of this share group holds a record it was given before "
                                      "the record goes back to the others (milliseconds)."),
    "share.partition.max.record.locks": (_positive_int, "group.share.partition.max.record.locks",
                                         "Most records of one partition this share group may have in flight "
                                         "(handed out, not yet finished); between the broker's "
                                         "group.share.min.partition.max.record.locks and "
                                         "group.share.max.partition.max.record.locks (a count)."),
    "share.session.timeout.ms": (_positive_int, "group.share.session.timeout.ms",
                                 "A member of this share group that sends no heartbeat for this long is removed "
                                 "(milliseconds)."),
    "share.heartbeat.interval.ms": (_positive_int, "group.share.heartbeat.interval.ms",
                                    "How often members of this share group are told to heartbeat (milliseconds)."),
    "consumer.session.timeout.ms": (_positive_int, "group.consumer.session.timeout.ms",
                                    "A member of this consumer-protocol group that sends no heartbeat for this "
                                    "long is removed (milliseconds)."),
    "consumer.heartbeat.interval.ms": (_positive_int, "group.consumer.heartbeat.interval.ms",
                                       "How often members of this consumer-protocol group are told to heartbeat "
                                       "(milliseconds)."),
    "streams.session.timeout.ms": (_positive_int, "group.streams.session.timeout.ms",
                                   "A member of this streams group that sends no heartbeat for this long is "
                                   "removed (milliseconds)."),
    "streams.heartbeat.interval.ms": (_positive_int, "group.streams.heartbeat.interval.ms",
                                      "How often members of this streams group are told to heartbeat "
                                      "(milliseconds)."),
    "streams.initial.rebalance.delay.ms": (lambda v: v.isdigit(), "group.streams.initial.rebalance.delay.ms",
                                           "How long this streams group, when new, waits before its first task "
                                           "assignment (milliseconds)."),
    "streams.num.standby.replicas": (lambda v: v.isdigit() and int(v) <= 2, "group.streams.num.standby.replicas",
                                     "Standby copies of each task of this streams group (0 to "
                                     "group.streams.max.standby.replicas, 2)."),
    "streams.num.warmup.replicas": (lambda v: v.isdigit() and int(v) <= 20, "group.streams.num.warmup.replicas",
                                    "Most warm-up tasks this streams group may run at a time (0 to "
                                    "group.streams.max.warmup.replicas, 20; no effect: as Kafka 4.4, no warm-up "
                                    "task is assigned)."),
    "streams.acceptable.recovery.lag": (lambda v: v.isdigit() and int(v) < 2**63,
                                        "group.streams.acceptable.recovery.lag",
                                        "The lag within which an instance of this streams group counts as caught "
                                        "up on a task's state (records), sent to its members."),
}


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    lock_duration_ms: int = 30_000
    delivery_limit: int = 5
    max_in_flight: int = 2000
    max_in_flight_bounds: tuple[int, int] = (100, 4000)  # what a group's share.partition.max.record.locks may be
    defaults: dict = field(default_factory=dict)  # group config name -> default value (string)


class ShareError(Exception):
    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(eq=False)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: frozenset[TopicPartition] = frozenset()
    session_timer: object | None = None


@dataclass(eq=False)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    protocol_type: str = "share"
    # every partition ever assigned here (not stored): what DeleteGroups clears at the share coordinators
    seen: set[TopicPartition] = field(default_factory=set)

    @property
    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"


@dataclass(eq=False)
class ShareSession:
    epoch: int = 1  # the epoch the next request must carry
    partitions: set[TopicPartition] = field(default_factory=set)


def _joined(futures: list[Future]) -> Future:
    """A future done once all of ``futures`` are."""
    joined: Future = Future()
    remaining = [len(futures)]

    def one_done(_: Future) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            joined.set_result(None)

    for future in futures:
        future.add_done_callback(one_done)
    return joined


class _AppendOnly:
    """A persister without a share coordinator (unit tests): writes go to an append function, reads find
    nothing stored."""

    def __init__(self, append_state: Callable[[StateKey, bytes | None], Future]) -> None:
        self._append_state = append_state

    def _done(self, value: object) -> Future:
        future: Future = Future()
        future.set_result(value)
        return future

    def initialize(self, key: StateKey, state_epoch: int, start: int) -> Future:
        return self.write(key, state_epoch, -1, start, [])

    def read(self, key: StateKey, leader_epoch: int) -> Future:
        return self._done((ErrorCode.NONE, None))

    def summary(self, key: StateKey) -> Future:
        return self._done((ErrorCode.NONE, None))

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start: int, runs: list) -> Future:
        end = runs[-1][1] + 1 if runs else start
        self._append_state(key, encode_share_state_value(start, end, runs, state_epoch, leader_epoch))
        return self._done(ErrorCode.NONE)

    def delete(self, key: StateKey) -> Future:
        self._append_state(key, None)
        return self._done(ErrorCode.NONE)


class ShareGroupCoordinator:
    """Both the group-coordinator side of share groups (membership, group configs) and the share-partition
    leader side (share sessions and in-flight windows of the partitions led here, their states read from and
    written to the share coordinator through ``persister``)."""

    def __init__(self, config: ShareGroupConfig, scheduler: Scheduler,
                 append: Callable[[str, list[tuple[bytes, bytes | None]]], Future],
                 persister: "StatePersister | Callable[[StateKey, bytes | None], Future]",
                 metadata: "MetadataCache | None", wake: Callable[[str, int], None] | None = None) -> None:
        self.config = config
        self.scheduler = scheduler
        self._append = append  # a group's records in __consumer_offsets (its configs)
        self.persister: StatePersister = persister if hasattr(persister, "read") else _AppendOnly(persister)
        self.metadata = metadata
        self.wake = wake or (lambda topic, partition: None)
        # whether this broker coordinates the group (its membership is here); a share-partition leader
        # elsewhere opens sessions without asking (members heartbeat to the coordinator, not to it)
        self.owns: Callable[[str], bool] = lambda group_id: True
        self.groups: dict[str, ShareGroup] = {}
        self.group_configs: dict[str, dict[str, str]] = {}
        # a cluster's share-partition leader takes the configs of a group coordinated elsewhere from its
        # coordinator (a future of the configs set for the group, None when unknown), when it reads a state
        self.fetch_configs: Callable[[str], Future] | None = None
        self.remote_configs: dict[str, dict[str, str]] = {}
        self.partitions: dict[StateKey, SharePartition] = {}
        self.epochs: dict[StateKey, tuple[int, int]] = {}  # (state epoch, leader epoch) each window was read at
        self._loading: dict[StateKey, Future] = {}  # ReadShareGroupState in flight
        self._read: dict[StateKey, tuple[int, StoredState | None]] = {}  # its answer, until the next fetch
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._lock_timers: dict[StateKey, tuple[int, object]] = {}

    # ----------------------------------------------------------------------------------------- configs

    def group_config(self, group_id: str, name: str) -> str:
        configs = self.group_configs if self.owns(group_id) else self.remote_configs
        value = configs.get(group_id, {}).get(name)
        return value if value is not None else self.config.defaults.get(name, "")

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id, "share.record.lock.duration.ms") or self.config.lock_duration_ms)

    def read_committed(self, group_id: str) -> bool:
        return self.group_config(group_id, "share.isolation.level") == "read_committed"

    def check_configs(self, configs: dict[str, str | None]) -> str | None:
        """Why these group config changes are invalid (None: valid)."""
        for name, value in configs.items():
            spec = GROUP_CONFIGS.get(name)
            if spec is None:
                return f"Unknown group config name: {name}"
            if value is not None and not spec[0](value):
                return f"Invalid value {value} for configuration {name}"
            if value is not None and name == "share.partition.max.record.locks":
                low, high = self.config.max_in_flight_bounds
                if not low <= int(value) <= high:  # Kafka's bounds: the broker's min and max of the group config
                    return f"{name} must be between {low} and {high}"
        return None

    def max_in_flight(self, group_id: str) -> int:
        """The group's cap on one partition's in-flight records (`share.partition.max.record.locks`)."""
        return int(self.group_config(group_id, "share.partition.max.record.locks") or self.config.max_in_flight)

    def set_group_configs(self, group_id: str, changes: dict[str, str | None]) -> Future:
        """Apply SET (value) and DELETE (None) changes to a group's configs; durable when the future is done."""
        configs = dict(self.group_configs.get(group_id, {}))
        for name, value in changes.items():
            if value is None:
                configs.pop(name, None)
            else:
                configs[name] = value
        self.group_configs[group_id] = configs
        return self._append(group_id, [(group_config_key(group_id),
                                        encode_group_config_value(configs) if configs else None)])

    # ----------------------------------------------------------------------------------------- membership

    def _now(self) -> int:
        return self.scheduler.now_ms()

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_names: list[str] | None, client_id: str, client_host: str) -> dict:
        """Answer one ShareGroupHeartbeat (the body without throttle time)."""
        try:
            if not group_id:
                raise ShareError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
            if not member_id:
                raise ShareError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
            if member_epoch == LEAVE_EPOCH:
                return self._leave(group_id, member_id)
            if member_epoch < LEAVE_EPOCH:
                raise ShareError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
            if member_epoch == 0 and not subscribed_names:
                raise ShareError(ErrorCode.INVALID_REQUEST,
                                 "SubscribedTopicNames must be set in first request.")
            return self._heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_names, client_id,
                                   client_host)
        except ShareError as exc:
            return {"error_code": exc.error_code, "error_message": exc.message, "member_id": None,
                    "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}

    def _heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                   subscribed_names: list[str] | None, client_id: str, client_host: str) -> dict:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        bumped = False  # whether this heartbeat moved the group epoch (the member then takes it)
        if member_epoch == 0:
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            if member is None:
                member = group.members[member_id] = ShareMember(member_id)
                group.group_epoch += 1
                bumped = True
                log.info("share group %s: member %s joined", group_id, member_id)
        elif member is None:
            raise ShareError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        elif member_epoch not in (member.member_epoch, member.previous_member_epoch):
            raise ShareError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The share group member has epoch {member_epoch}, the coordinator "
                             f"{member.member_epoch}. The member must rejoin.")
        assert group is not None
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed_names is not None and tuple(sorted(subscribed_names)) != member.subscribed_names:
            member.subscribed_names = tuple(sorted(subscribed_names))
            if not bumped:
                group.group_epoch += 1
                bumped = True
        assignment = self._assignment(member.subscribed_names)
        if assignment != member.assigned:
            member.assigned = assignment
            group.seen.update(assignment)
            if not bumped:
                group.group_epoch += 1
                bumped = True
        if bumped:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.group_epoch
        # the assignment goes out on a join, when it changed, and to a member still at its previous epoch
        # (the answer that moved it on was lost)
        changed = member_epoch == 0 or member_epoch != member.member_epoch
        self._touch(group, member)
        body = {"error_code": 0, "error_message": None, "member_id": member.member_id,
                "member_epoch": member.member_epoch, "heartbeat_interval_ms": int(
                    self.group_config(group_id, "share.heartbeat.interval.ms") or self.config.heartbeat_interval_ms),
                "assignment": None}
        if changed:
            body["assignment"] = {"topic_partitions": [
                {"topic_id": t, "partitions": sorted(p for tid, p in member.assigned if tid == t)}
                for t in sorted({tid for tid, _ in member.assigned})]}
        return body

    def _assignment(self, names: tuple[str, ...]) -> frozenset[TopicPartition]:
        """Every partition of every subscribed topic that exists: members of a share group share them."""
        out: set[TopicPartition] = set()
        if self.metadata is not None:
            for name in names:
                topic = self.metadata.topic(name)
                if topic is not None and not topic.is_internal:
                    out.update((topic.topic_id, p) for p in range(topic.partitions))
        return frozenset(out)

    def _leave(self, group_id: str, member_id: str) -> dict:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            raise ShareError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        log.info("share group %s: member %s left", group_id, member_id)
        # a closing client may send its last acknowledgements (share session epoch -1) after its leave, so the
        # session and the records it holds stay until then, or until their locks run out
        self._remove(group, member, release=False)
        return {"error_code": 0, "error_message": None, "member_id": member_id, "member_epoch": LEAVE_EPOCH,
                "heartbeat_interval_ms": 0, "assignment": None}

    def _touch(self, group: ShareGroup, member: ShareMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()  # type: ignore[attr-defined]
        timeout = int(self.group_config(group.group_id, "share.session.timeout.ms") or self.config.session_timeout_ms)
        member.session_timer = self.scheduler.call_later(timeout, lambda: self._expire(group, member))

    def _expire(self, group: ShareGroup, member: ShareMember) -> None:
        if group.members.get(member.member_id) is member:
            log.info("share group %s: member %s removed (session timeout)", group.group_id, member.member_id)
            self._remove(group, member)

    def _remove(self, group: ShareGroup, member: ShareMember, release: bool = True) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()  # type: ignore[attr-defined]
            member.session_timer = None
        group.members.pop(member.member_id, None)
        group.group_epoch += 1
        if release:
            self._drop_session(group.group_id, member.member_id)
        else:  # its session goes once its records' locks are over, unless it came back
            self.scheduler.call_later(self.lock_duration_ms(group.group_id), lambda: None if self.is_member(
                group.group_id, member.member_id) else self._drop_session(group.group_id, member.member_id))

    def _drop_session(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
        self.release_member(group_id, member_id)

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups on a share group: only an empty one; its delivery state goes too."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        try:
            keys = {(group_id, t, p) for t, p in group.seen} | {k for k in self.partitions if k[0] == group_id}
            for key in sorted(keys):
                self.drop_window(key)
                self.persister.delete(key)
            if group_id in self.group_configs:
                del self.group_configs[group_id]
                self._append(group_id, [(group_config_key(group_id), None)])
        except Exception as exc:
            log.warning("share group %s: cannot store its deletion: %s", group_id, exc)
        return ErrorCode.NONE

    # ----------------------------------------------------------------------------------------- sessions

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def begin_session(self, group_id: str, member_id: str, epoch: int, acknowledge_only: bool) -> ShareSession:
        """The share session a ShareFetch (or ShareAcknowledge) works in; raises ShareError when its epoch
        does not fit. Epoch -1 gives the closing session (already removed)."""
        key = (group_id, member_id)
        if epoch == INITIAL_SESSION_EPOCH:
            if acknowledge_only:
                raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "A share acknowledge cannot open a session.")
            if self.owns(group_id) and not self.is_member(group_id, member_id):
                raise ShareError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of {group_id}.")
            if not any(k[0] == group_id for k in self.sessions):
                self._forget_idle(group_id)
            old = self.sessions.get(key)
            if old is not None:  # a member starting over gives back what it held
                self.release_member(group_id, member_id)
            session = self.sessions[key] = ShareSession()
            return session
        session = self.sessions.get(key)
        if session is None:
            raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"Share session for member {member_id} not found.")
        if epoch == FINAL_SESSION_EPOCH:
            del self.sessions[key]
            return session
        if epoch != session.epoch:
            raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"Share session epoch {epoch} is not the expected {session.epoch}.")
        session.epoch = 1 if session.epoch >= 0x7FFFFFFF else session.epoch + 1
        return session

    # ----------------------------------------------------------------------------------------- delivery state

    def _forget_idle(self, group_id: str) -> None:
        """The group opens its first share session here: windows holding no record and fully stored are
        dropped, so they are read again from the share coordinator (AlterShareGroupOffsets may have changed
        them while the group was empty)."""
        for key, sp in list(self.partitions.items()):
            if key[0] == group_id and not sp.dirty and not any(r.state == ACQUIRED for r in sp.records.values()):
                self.drop_window(key)

    def drop_window(self, key: StateKey) -> None:
        """Forget the in-memory window of ``key`` (it is read again on the next fetch)."""
        self.partitions.pop(key, None)
        self.epochs.pop(key, None)
        self._read.pop(key, None)
        armed = self._lock_timers.pop(key, None)
        if armed is not None:
            armed[1].cancel()  # type: ignore[attr-defined]

    def forget_partition(self, topic_id: bytes, partition: int) -> None:
        """This broker no longer leads the partition: its windows go (the new leader reads their states from
        the share coordinator); a read still in flight is ignored when it lands."""
        for key in [k for k in set(self.partitions) | set(self._read) if k[1:] == (topic_id, partition)]:
            self.drop_window(key)
        for key in [k for k in self._loading if k[1:] == (topic_id, partition)]:
            del self._loading[key]

    def _load(self, key: StateKey, leader_epoch: int) -> tuple[int, StoredState | None]:
        """The stored state of ``key`` from the share coordinator: at once when it answers at once (a local
        one), else ShareError(LEADER_NOT_AVAILABLE) until its answer lands (as Kafka answers a fetch of a
        share partition still initializing); the parked fetches are woken then."""
        read = self._read.pop(key, None)
        if read is not None:
            return read
        if key in self._loading:
            raise ShareError(ErrorCode.LEADER_NOT_AVAILABLE, "The share partition is initializing.")
        future = self.persister.read(key, leader_epoch)
        configs = None
        if self.fetch_configs is not None and not self.owns(key[0]):
            configs = self.fetch_configs(key[0])  # e.g. its share.auto.offset.reset, for a window it opens
        if future.done() and configs is None:
            return future.result()
        both = _joined([future] if configs is None else [future, configs])
        self._loading[key] = both

        def landed(f: Future) -> None:
            if self._loading.get(key) is f:  # else the partition moved away meanwhile
                del self._loading[key]
                if configs is not None and configs.result() is not None:
                    self.remote_configs[key[0]] = configs.result()
                self._read[key] = future.result()
                self._wake(key)

        both.add_done_callback(landed)
        raise ShareError(ErrorCode.LEADER_NOT_AVAILABLE, "The share partition is initializing.")

    def share_partition(self, group_id: str, topic_id: bytes, partition: int, log_start: int,
                        high_watermark: int, offset_for_time: Callable[[int], int] | None = None,
                        leader_epoch: int = -1) -> SharePartition:
        """The group's delivery state of a partition led here in ``leader_epoch``: read from the share
        coordinator on first use, or created at `share.auto.offset.reset` when nothing is stored
        (``offset_for_time``: the first offset with a timestamp at or after a time, -1 for none, for
        `by_duration:`). Raises ShareError (LEADER_NOT_AVAILABLE, retriable) while it cannot be read."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None:
            code, stored = self._load(key, leader_epoch)
            if code:
                log.warning("share group %s: cannot read the state of a partition: %s", group_id,
                            ErrorCode(code).name)
                raise ShareError(ErrorCode.LEADER_NOT_AVAILABLE, "The share partition state cannot be read.")
            state_epoch = stored.state_epoch if stored is not None else 0
            self.epochs[key] = (state_epoch, leader_epoch)
            if stored is not None and stored.start != UNINITIALIZED:
                log.info("share group %s: state of partition %d of topic %s read from the share coordinator "
                         "(start %d, state epoch %d)", group_id, partition, topic_id.hex(), stored.start, state_epoch)
                sp = self.partitions[key] = SharePartition.restore(
                    stored.start, stored.end, stored.runs, delivery_limit=self.config.delivery_limit,
                    max_in_flight=self.max_in_flight(group_id))
                return sp
        if sp is None:
            reset = self.group_config(group_id, "share.auto.offset.reset")
            start = high_watermark
            if reset == "earliest":
                start = log_start
            elif reset.startswith(BY_DURATION) and offset_for_time is not None:
                found = offset_for_time(self._now() - iso_duration_ms(reset[len(BY_DURATION):]))
                start = found if found >= 0 else high_watermark
            sp = self.partitions[key] = SharePartition(start, self.config.delivery_limit, self.max_in_flight(group_id))
        return sp

    def unacquire(self, group_id: str, member_id: str, ranges: dict[TopicPartition, list[tuple[int, int]]]) -> None:
        """Give back records a member was just given but will not receive (its ShareFetch was throttled)."""
        for (topic_id, partition), spans in ranges.items():
            key = (group_id, topic_id, partition)
            sp = self.partitions.get(key)
            if sp is None:
                continue
            for first, last in spans:
                sp.unacquire(member_id, first, last)
            self._wake(key)

    def acquired(self, key: StateKey, sp: SharePartition) -> None:
        """Records of ``sp`` were just acquired: make sure a timer releases them when their locks run out."""
        self._arm_lock_timer(key, sp)

    def acknowledge(self, group_id: str, member_id: str, partitions: list[tuple[bytes, int, list[dict]]],
                    renew: bool = False) -> tuple[dict[TopicPartition, int], list[Future]]:
        """Apply a request's acknowledgement batches ((topic id, partition, batches) with the wire fields
        first_offset, last_offset, acknowledge_types); returns the error code per partition and futures
        done once the new states are durable. ``renew`` (the request's IsRenewAck, v2) allows renew
        acknowledgements, which restart the records' acquisition locks."""
        results: dict[TopicPartition, int] = {}
        renew_until = self._now() + self.lock_duration_ms(group_id) if renew else None
        keys: list[StateKey] = []
        for topic_id, partition, batches in partitions:
            key = (group_id, topic_id, partition)
            sp = self.partitions.get(key)
            code = ErrorCode.NONE
            for batch in batches:
                result = ErrorCode.INVALID_RECORD_STATE if sp is None else sp.acknowledge(
                    member_id, batch["first_offset"], batch["last_offset"], list(batch["acknowledge_types"]),
                    renew_until)
                code = code or result
            results[(topic_id, partition)] = code
            if sp is not None:
                keys.append(key)
                self._wake(key)  # released records may be acquired by a parked fetch
        return results, self.store(keys)

    def _arm_lock_timer(self, key: StateKey, sp: SharePartition) -> None:
        due = sp.next_lock_deadline()
        if due is None:
            return
        armed = self._lock_timers.get(key)
        if armed is not None:
            if armed[0] <= due:
                return
            armed[1].cancel()  # type: ignore[attr-defined]
        handle = self.scheduler.call_later(max(due - self._now(), 0), lambda: self._on_lock_timer(key))
        self._lock_timers[key] = (due, handle)

    def _on_lock_timer(self, key: StateKey) -> None:
        self._lock_timers.pop(key, None)
        sp = self.partitions.get(key)
        if sp is None:
            return
        if sp.expire_locks(self._now()):
            self._wake(key)
            self.store([key])
        self._arm_lock_timer(key, sp)

    def release_member(self, group_id: str, member_id: str) -> None:
        keys = []
        for key, sp in self.partitions.items():
            if key[0] == group_id and sp.release_member(member_id):
                keys.append(key)
                self._wake(key)
        self.store(keys)

    def _wake(self, key: StateKey) -> None:
        """Records became AVAILABLE again: wake the share fetches parked on that partition."""
        topic = self.metadata.topic_by_id(key[1]) if self.metadata is not None else None
        if topic is not None:
            self.wake(topic.name, key[2])

    def store(self, keys: list[StateKey]) -> dict[StateKey, Future]:
        """Write the changed delivery states among ``keys`` to their share coordinator; futures of an error
        code, done once the state is durable there. Every write carries the whole window, so a write that
        failed is made good by the next one; a fenced one (the state was re-initialized, or a newer leader
        read it) drops the window, read again on the next fetch."""
        durable = {}
        for key in keys:
            sp = self.partitions.get(key)
            if sp is None or not sp.dirty or sp.untouched:
                continue
            start, _, runs = sp.snapshot()
            state_epoch, leader_epoch = self.epochs.get(key, (0, -1))
            sp.dirty = False
            sp.persisted = True
            written = durable[key] = self.persister.write(key, state_epoch, leader_epoch, start, runs)
            written.add_done_callback(lambda f, key=key, sp=sp: self._written(key, sp, f))
        return durable

    def _written(self, key: StateKey, sp: SharePartition, future: Future) -> None:
        code = future.result()
        if not code:
            return
        log.warning("share group %s: its delivery state was not stored: %s", key[0], ErrorCode(code).name)
        if self.partitions.get(key) is not sp:
            return
        if code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
            self.drop_window(key)
        else:
            sp.dirty = True

    # ----------------------------------------------------------------------------------------- loading

    def restore_configs(self, group_id: str, configs: dict[str, str] | None) -> None:
        if configs:
            self.group_configs[group_id] = configs
        else:
            self.group_configs.pop(group_id, None)

    def unload(self, owns: Callable[[str], bool]) -> None:
        """Forget the groups whose coordinator partition this broker no longer leads."""
        for group_id in [g for g in self.groups if not owns(g)]:
            group = self.groups.pop(group_id)
            for member in group.members.values():
                if member.session_timer is not None:
                    member.session_timer.cancel()  # type: ignore[attr-defined]
        # share sessions stay: they belong to the partitions led here, whoever coordinates the group
        for group_id in [g for g in self.group_configs if not owns(g)]:
            del self.group_configs[group_id]
