"""Fetch (key 1), versions 0-17.

Long poll: the response is built at once; if it holds fewer than `min_bytes` and `max_wait_ms` allows, the
handler parks until an append to one of the requested partitions wakes it (Broker.wait_for_append), then
builds again, until `min_bytes` is met or the wait is over.

Only the partition's leader answers (NOT_LEADER_OR_FOLLOWER elsewhere; with `current_leader_epoch`, v9+,
FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH when it is not the leader's). From v12 the first two name the
leader this broker knows of, and from v16 its endpoint (KIP-951, broker/leader_hints.py). Consumers read
below the high watermark (read_uncommitted) or the last stable offset (read_committed). A follower
(`replica_id` >= 0, v0-14) reads up to the log end; its fetch offset tells the leader what it holds (the
high watermark and the ISR follow from it: cluster/replica_manager.py), and it is answered the leader's high
watermark and log start, which its own follow.

Sizes: each partition gets at most `partition_max_bytes`, the whole response at most `max_bytes` (v3+)
and never more than the broker's `fetch.max.bytes` (4 MiB by default: it bounds the memory of responses
read into memory, such as down-converted ones, and caps from 512 KiB to 55 MiB made no measurable
difference to librdkafka consumers in make bench), except that the first partition with data always
returns at least its first whole batch, so a consumer whose limits are smaller than a batch still makes
progress. A fetch from the middle of a batch returns the whole batch; clients skip the records before
their offset.

v0-3 serve legacy MessageSets: stored v2 batches are down-converted (magic 0 for v0-1, magic 1 for v2-3),
uncompressed; up to a stored batch that cannot be decoded (CORRUPT_MESSAGE when it is the first).
v13+ name topics by id (UNKNOWN_TOPIC_ID when unknown).
Sessions (KIP-227, v7+; broker/fetch_sessions.py): a fetcher that asks for a session gets one, names only
the partitions whose position changed in its later (incremental) fetches and is answered only the
partitions with something new; FETCH_SESSION_ID_NOT_FOUND and INVALID_FETCH_SESSION_EPOCH otherwise.
Followers use them (cluster/fetcher.py), so an idle partition costs a replica fetch next to nothing.
Isolation (v4+): every partition reports its last stable offset (LSO: the first offset of its oldest open
transaction, or the high watermark). read_committed reads only batches below the LSO and lists the aborted
transactions (producer id, first offset) that overlap the returned range, from the partition's
aborted-transaction index, so the client can drop their records; read_uncommitted reads up to the high
watermark and gets no list. Control batches (markers) are returned either way; clients skip them.
Zero-copy: a v4+ fetch takes each segment's span of at least REGION_MIN_BYTES as a file region, which the
connection sends with sendfile(2) straight from the page cache (net/connection.py); smaller spans and
down-converted fetches are read into memory.
Quotas (security/quotas.py): a consumer over its `consumer_byte_rate` is answered no partitions and its
throttle time; the records a consumer is sent count against it. Followers are exempt; instead, the leader
replication throttle (cluster/leader_throttle.py) answers a follower outside the ISR no records of a partition
that `leader.replication.throttled.replicas` names while this leader's throttled traffic is over
`leader.replication.throttled.rate`.
Gaps: no preferred read replica (consumers read from leaders only); v15+ followers (replica_state) are not
served as followers.
"""

import time
from typing import Callable, NamedTuple

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.core import now_ms
from odradek.broker.fetch_sessions import FetchSession, FetchSessionError, SessionPartition, TopicPartition
from odradek.broker.leader_hints import LEADERSHIP_ERRORS, hint_leader, node_endpoints
from odradek.security.quotas import FETCH as FETCH_QUOTA
from odradek.broker.registry import handler
from odradek.cluster.fetcher import UNLIMITED
from odradek.cluster.partition import ReplicationError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.records import legacy
from odradek.records.batch import InvalidRecordError, iter_batches
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.segment import FileRegion

ZERO_UUID = bytes(16)
MAX_WAIT_CAP_MS = 30_000
# Below this a pread is cheaper than the loop iterations and syscalls a sendfile of its own costs.
REGION_MIN_BYTES = 256 * 1024


class Want(NamedTuple):
    """One partition a fetch reads: as the request names it, or as its session holds it."""

    topic: str | None  # None: not known here (answered with `missing`)
    topic_id: bytes
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    missing: int
    session_key: TopicPartition | None = None  # its key in the fetch session


@handler(ApiKey.FETCH, 0, 17)
async def fetch(ctx: RequestContext, request: dict) -> dict:
    version = ctx.api_version
    session = None
    if version >= 7:
        try:
            session = ctx.broker.fetch_sessions.begin(request["session_id"], request["session_epoch"],
                                                      privileged=version <= 14 and request["replica_id"] >= 0)
        except FetchSessionError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.error_code, "session_id": 0, "responses": []}
    follower = version <= 14 and request["replica_id"] >= 0
    quotas = ctx.broker.quotas
    if quotas.enabled and not follower:
        ctx.throttle_ms = max(ctx.throttle_ms, quotas.throttle_ms(FETCH_QUOTA, *ctx.quota_client, now_ms()))
        if ctx.throttle_ms:  # over its consumer_byte_rate: nothing read until the throttle is over
            return {"throttle_time_ms": ctx.throttle_ms, "error_code": 0,
                    "session_id": session.id if session is not None else 0, "responses": []}
    if follower:  # brokers need CLUSTER_ACTION
        cluster_action = ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)
        may_read: Callable[[str], bool] = lambda name: cluster_action  # noqa: E731
    else:
        may_read = lambda name: ctx.allowed(Op.READ, Res.TOPIC, name)  # noqa: E731
    wanted = _wanted(ctx, request, session, may_read)
    # an incremental fetch leaves out what has nothing new: those partitions need not even be read
    quiet = session.partitions if session is not None and request["session_epoch"] > 0 and not follower else None
    entries, size, keys = _build(ctx, request, wanted, quiet)
    max_wait_s = min(max(request["max_wait_ms"], 0), MAX_WAIT_CAP_MS) / 1000.0
    deadline = time.monotonic() + max_wait_s
    while size < request["min_bytes"] and keys:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not ctx.connection.is_open:
            break
        await ctx.broker.wait_for_append(keys, remaining)
        entries, size, keys = _build(ctx, request, wanted, quiet)
    if follower and size:
        _count_throttled(ctx, entries)
    if quotas.enabled and not follower and size:
        ctx.throttle_ms = max(ctx.throttle_ms, quotas.record(FETCH_QUOTA, *ctx.quota_client, size, now_ms()))
    if session is not None:
        told = [(want, entry) for want, entry in entries if session.partitions[want.session_key].must_answer(entry)]
        if request["session_epoch"] > 0:  # incremental: only what changed
            entries = told
        session.answered([want.session_key for want, entry in entries if entry["records"]])
    leaders: set[int] = set()  # named in leader hints (KIP-951)
    responses: list[dict] = []
    metrics = None if follower else ctx.broker.metrics
    for want, entry in entries:
        if metrics is not None and entry["records"]:
            records = entry["records"]
            metrics.fetched(want.topic, sum(map(len, records)) if type(records) is list else len(records))
        if entry.pop("_hint", False) and version >= 12:
            hint_leader(ctx.broker.metadata, entry, want.topic, want.index, leaders)
        if not responses or responses[-1]["_key"] != (want.topic, want.topic_id):
            responses.append({"_key": (want.topic, want.topic_id), "topic": want.topic or "",
                              "topic_id": want.topic_id, "partitions": []})
        responses[-1]["partitions"].append(entry)
    for response in responses:
        del response["_key"]
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": session.id if session is not None else 0,
            "responses": responses}
    if leaders and version >= 16:
        body["node_endpoints"] = node_endpoints(ctx.broker.metadata, leaders, ctx.connection.listener)
    return body


def _wanted(ctx: RequestContext, request: dict, session: FetchSession | None,
            may_read: Callable[[str], bool]) -> list[Want]:
    """The partitions to read: the request's, or (applying the request to it) the session's."""
    metadata = ctx.broker.metadata
    by_id = ctx.api_version >= 13
    named = []
    for topic in request["topics"]:
        if by_id:
            t = metadata.topic_by_id(topic["topic_id"])
            name = t.name if t is not None else None
        else:
            name = topic["topic"]
        for part in topic["partitions"]:
            named.append((name, topic["topic_id"], part))
    refusal = _refusals(ctx, may_read)
    if session is None:
        return [_want(name, refusal(name), ctx.api_version, topic_id, part["partition"], part["fetch_offset"],
                      part["partition_max_bytes"], part["current_leader_epoch"]) for name, topic_id, part in named]
    partitions = session.partitions
    if request["session_epoch"] > 0:
        for gone in request["forgotten_topics_data"] or ():
            if by_id:
                t = metadata.topic_by_id(gone["topic_id"])
                name = t.name if t is not None else ""
            else:
                name = gone["topic"]
            for index in gone["partitions"]:
                partitions.pop((name, index), None)
    for name, topic_id, part in named:
        key = (name or "", part["partition"])
        cached = partitions.get(key)
        if cached is None:
            partitions[key] = SessionPartition(name or "", topic_id, part["partition"], part["fetch_offset"],
                                               part["partition_max_bytes"], part["current_leader_epoch"],
                                               part["log_start_offset"])
        else:
            cached.update(part)
    out = []
    for key, p in partitions.items():
        name = p.topic or None
        code = refusal(name)
        want = p.want
        if want is None or want.missing != code:  # new, changed by the fetcher, or its topic's standing changed
            want = p.want = _want(name, code, ctx.api_version, p.topic_id, p.index, p.fetch_offset, p.max_bytes,
                                  p.current_leader_epoch, key)
        out.append(want)
    return out


def _refusals(ctx: RequestContext, may_read: Callable[[str], bool]) -> Callable[[str | None], int]:
    """A topic's refusal code (NONE: readable), asked once per topic of the fetch: a consumer of a thousand
    partitions of one topic pays for one authorization and one lookup."""
    metadata = ctx.broker.metadata
    missing = ErrorCode.UNKNOWN_TOPIC_ID if ctx.api_version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    known: dict[str | None, int] = {}

    def refusal(name: str | None) -> int:
        code = known.get(name)
        if code is None:
            if name is not None and not may_read(name):  # asked before whether it exists, so nothing leaks
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif metadata.topic(name) is None:
                code = missing
            else:
                code = ErrorCode.NONE
            known[name] = code
        return code
    return refusal


def _want(name: str | None, refusal: int, version: int, topic_id: bytes, index: int, fetch_offset: int,
          max_bytes: int, current_leader_epoch: int, session_key: TopicPartition | None = None) -> Want:
    if refusal not in (ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED) and version >= 13:
        name = None  # an unknown topic id has no name to answer with
    return Want(name, topic_id, index, fetch_offset, max_bytes, current_leader_epoch, refusal, session_key)


def _build(ctx: RequestContext, request: dict, wanted: list[Want],
           quiet: dict[TopicPartition, SessionPartition] | None = None) -> tuple[list[tuple[Want, dict]], int, list]:
    """Return ((want, response entry) per partition, bytes of records in them, partitions worth waiting on).
    With ``quiet`` (an incremental fetch's session partitions), a partition read up to its end whose high
    watermark, last stable offset and log start are those last sent gets no entry: the answer would leave it
    out, and a consumer of many quiet partitions costs only this check for each."""
    broker = ctx.broker
    version = ctx.api_version
    remaining = min(request["max_bytes"] if version >= 3 else 0x7FFFFFFF, broker.config.int("fetch.max.bytes"))
    magic = 0 if version <= 1 else 1 if version <= 3 else 2
    replica_id = request["replica_id"] if version <= 14 else -1
    leader_bound = broker.live_config.int("leader.replication.throttled.rate") if replica_id >= 0 else UNLIMITED
    read_committed = request["isolation_level"] == 1
    region_min = REGION_MIN_BYTES if magic == 2 else None
    total = 0
    keys = []
    entries = []
    for want in wanted:
        index = want.index
        if want.missing:
            entries.append((want, _partition(index, want.missing)))
            continue
        name = want.topic
        try:
            partition = broker.replicas.leader_partition(name, index, want.current_leader_epoch)
        except ReplicationError as exc:
            refused = _partition(index, exc.error_code)
            refused["_hint"] = exc.error_code in LEADERSHIP_ERRORS
            entries.append((want, refused))
            continue
        plog = partition.log
        if replica_id >= 0:
            broker.replicas.follower_fetched(partition, replica_id, want.fetch_offset)
            upper = None
            if leader_bound < UNLIMITED and broker.replicas.leader_quota.holds_back(
                    name, index, replica_id in partition.isr, leader_bound):
                # over the leader replication throttle: offsets only; the fetch waits for news as an empty one does
                entries.append((want, _partition(index, 0, plog.high_watermark, plog.log_start_offset,
                                                 plog.last_stable_offset)))
                keys.append((name, index))
                continue
        else:
            upper = plog.last_stable_offset if read_committed else plog.high_watermark
        lso = plog.last_stable_offset
        if quiet is not None and want.fetch_offset >= upper:
            sent = quiet[want.session_key]
            if (sent.high_watermark == plog.high_watermark and sent.last_stable_offset == lso
                    and sent.sent_log_start == plog.log_start_offset):
                keys.append((name, index))
                continue
        entry = _partition(index, 0, plog.high_watermark, plog.log_start_offset, lso)
        limit = min(want.max_bytes, remaining)
        try:
            data = plog.read(want.fetch_offset, max(limit, 0), min_one_batch=(total == 0),
                             max_offset=upper, region_min_bytes=region_min)
        except OffsetOutOfRangeError:  # answered without offsets or transactions, as Kafka does
            entries.append((want, {**_partition(index, ErrorCode.OFFSET_OUT_OF_RANGE), "aborted_transactions": None}))
            continue
        if read_committed:
            entry["aborted_transactions"] = _aborted(plog, want.fetch_offset, data, lso)
        if data and magic < 2:
            try:
                data = legacy.downconvert(data, magic, want.fetch_offset)
            except InvalidRecordError:  # a stored batch that cannot be read (bad old data): this partition only
                entry["error_code"] = ErrorCode.CORRUPT_MESSAGE
                entries.append((want, entry))
                continue
        entry["records"] = data
        size = sum(map(len, data)) if region_min is not None else len(data)
        total += size
        remaining -= size
        keys.append((name, index))
        entries.append((want, entry))
    return entries, total, keys


def _count_throttled(ctx: RequestContext, entries: list[tuple[Want, dict]]) -> None:
    """The bytes of leader-throttled partitions in a follower's answer count toward the leader replication
    throttle (in Kafka too, whether the follower is in the ISR or not)."""
    if ctx.broker.live_config.int("leader.replication.throttled.rate") >= UNLIMITED:
        return
    quota = ctx.broker.replicas.leader_quota
    quota.sent(sum(sum(map(len, entry["records"])) if type(entry["records"]) is list else len(entry["records"])
                   for want, entry in entries if entry["records"] and quota.is_throttled(want.topic, want.index)))


def _aborted(plog, fetch_offset: int, chunks: "list[bytes | FileRegion]", lso: int) -> list[dict]:
    """Aborted transactions overlapping [fetch_offset, end of the returned batches).

    read_committed exists from v4 on, so its data is always the chunk list of a magic 2 read.
    """
    if not chunks:
        return []
    last = chunks[-1]
    if isinstance(last, FileRegion):
        upper = last.last_offset() + 1
    else:
        upper = lso
        for _, header in iter_batches(last):
            upper = header.last_offset + 1
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
            for t in plog.aborted_transactions(fetch_offset, upper)]


def _partition(index: int, error: int, high_watermark: int = -1, log_start_offset: int = -1,
               last_stable_offset: int = -1) -> dict:
    return {
        "partition_index": index,
        "error_code": error,
        "high_watermark": high_watermark,
        "last_stable_offset": last_stable_offset,
        "log_start_offset": log_start_offset,
        "aborted_transactions": [] if error else None,  # Kafka's empty list on a refused partition
        "preferred_read_replica": -1,
        "records": b"",
    }
