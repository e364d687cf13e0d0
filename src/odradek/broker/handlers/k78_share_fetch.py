"""ShareFetch (key 78), versions 1-2: records for a member of a share group (KIP-932).

The request works in the member's share session (coordinator/share_groups.py: epoch 0 opens it, -1 closes
it, otherwise the next epoch; INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND), adds the partitions it
names and drops the forgotten ones. Piggy-backed acknowledgements (not allowed when opening a session:
INVALID_REQUEST) are applied first and made durable before the answer; each partition reports their
outcome in `acknowledge_error_code` (INVALID_RECORD_STATE for a record the member does not hold).
Closing the session releases whatever the member still holds and fetches nothing. v2 (Kafka 4.2+) adds
acquire modes (`share_acquire_mode`, KIP-1206: batch-optimized or record-limit) and renew
acknowledgements (`is_renew_ack`, KIP-1222), both below.

Then, per partition of the session, the group's delivery state (coordinator/share_partition.py) says where
to read: the first released record, else the end of the in-flight window. The log is read as Fetch reads it
(`PartitionLog.read` below the high watermark, or the last stable offset for a group whose
`share.isolation.level` is read_committed, whole batches, `max_bytes` for the response with at least one
batch), and up to `max_records` records from what was read are acquired for `share.record.lock.duration.ms`
(`acquired_records` ranges with their delivery counts; clients drop records outside them). Control batches,
and for read_committed the batches of aborted transactions (from the partition's aborted-transaction index),
are archived and never handed out. Nothing to acquire: the request parks until an append or a release wakes
it (Broker.wait_for_append), for at most `max_wait_ms`.

A partition whose state this request initializes gives no records when another partition of the request
already did: Kafka initializes share partitions asynchronously and answers with the partitions that were
ready first, so the first fetch of a session over two partitions holding records answers one of them, the
next fetch the other (librdkafka's 0179 expects one partition's records in its first poll, and 0172 that two
consumers of one group both get records).

The first fetch of a (group, partition) on its leader reads the stored state from the share coordinator
(coordinator/share_coordinator.py; another broker's: ReadShareGroupState). While that read is in flight the
partition has nothing to acquire and the fetch parks, as Kafka's delayed share fetch waits for a share
partition to initialize; the answer wakes it (a failed read is tried again by the next fetch). Kafka answers
LEADER_NOT_AVAILABLE to a fetch that finds the partition initializing, but librdkafka's share consumer
treats that code as fatal, so odradek waits instead. An acknowledgement whose state could not be stored
reports the share coordinator's error in `acknowledge_error_code`.

Errors per partition: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED, NOT_LEADER_OR_FOLLOWER (naming the
leader in `current_leader` and `node_endpoints`, KIP-951, as Fetch does) and the other errors of a replica
that cannot be read; top level: GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST,
UNKNOWN_MEMBER_ID, and the session errors.
v2 (Kafka 4.2+) adds `share_acquire_mode` (KIP-1206): 0, batch-optimized (v1's only mode), may exceed
`max_records` to finish the batch in which the limit was reached; 1, record-limit, acquires at most
`max_records`; another value is INVALID_REQUEST. And `is_renew_ack` (KIP-1222): the acknowledgements may
hold renew (type 4), which restarts the records' acquisition locks; such a request only acknowledges (it
must ask for nothing: max_wait_ms, min_bytes, max_bytes, max_records and batch_size all 0, else
INVALID_REQUEST) and fetches nothing. A renew without `is_renew_ack` answers INVALID_REQUEST for its partition.
v0 (Kafka 4.0's early access) is not served.

A request with `max_bytes` 0 (librdkafka's `fetch.max.bytes=0`) acquires nothing and, as Kafka 4.4 answers,
names no partition (after `max_wait_ms`, unless it carried acknowledgements); any other `max_bytes` is a
soft limit (at least one batch). In batch-optimized mode the partition's in-flight cap
(`share.partition.max.record.locks`) is exceeded to finish a batch, as `max_records` is.

Quotas (security/quotas.py), as Kafka throttles ShareFetch with the fetch quota: a member over its
`consumer_byte_rate` gets its `throttle_time_ms` and no records (its acknowledgements are still applied);
the records a member is sent count against that rate, and a response whose records would take it over the
rate goes out without them, with its throttle time (Kafka's throttled response), the records given back.

Gaps: `batch_size` is ignored (one acquired range per run of equal delivery counts); `min_bytes` counts as one
record.
"""

import asyncio
import time

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.core import now_ms
from odradek.broker.handlers.k02_list_offsets import first_at_or_after
from odradek.broker.leader_hints import LEADERSHIP_ERRORS, hint_leader, node_endpoints
from odradek.broker.registry import handler
from odradek.cluster.partition import ReplicationError
from odradek.coordinator.share_groups import FINAL_SESSION_EPOCH, INITIAL_SESSION_EPOCH, ShareError
from odradek.coordinator.share_partition import LogBatch
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import iter_batches
from odradek.security.quotas import FETCH as FETCH_QUOTA
from odradek.storage.errors import OffsetOutOfRangeError

PROVEN_BY = "interop and cluster suites, franz-go's share tests, differential suite"
MAX_WAIT_CAP_MS = 30_000
DEFAULT_MAX_RECORDS = 500
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # ShareAcquireMode (v2)
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def _failed(code: int, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "acquisition_lock_timeout_ms": 0,
            "responses": [], "node_endpoints": []}


def _entry(index: int, error: int = 0, ack_error: int = 0) -> dict:
    return {"partition_index": index, "error_code": error, "error_message": None, "acknowledge_error_code": ack_error,
            "acknowledge_error_message": None, "current_leader": NO_LEADER, "records": b"", "acquired_records": []}


def acknowledgements(request: dict) -> list[tuple[bytes, int, list[dict]]]:
    """(topic id, partition, acknowledgement batches) of a ShareFetch or ShareAcknowledge request."""
    return [(t["topic_id"], p["partition_index"], list(p["acknowledgement_batches"]))
            for t in request["topics"] for p in t["partitions"] if p["acknowledgement_batches"]]


def refusal(ctx: RequestContext, request: dict) -> tuple[int, str | None] | None:
    """Why a ShareFetch or ShareAcknowledge is refused as a whole (error code, message), or None."""
    if not request["group_id"]:
        return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
    if not ctx.allowed(Op.READ, Res.GROUP, request["group_id"]):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    if not request["member_id"]:
        return ErrorCode.UNKNOWN_MEMBER_ID, None
    return None


def _fetch_refusal(request: dict) -> str | None:
    """Why a v2 request's acquire mode or renew flag make it INVALID_REQUEST, or None (v1 decodes the
    defaults: batch-optimized, no renew)."""
    if request["share_acquire_mode"] not in (BATCH_OPTIMIZED, RECORD_LIMIT):
        return f"Unknown ShareAcquireMode {request['share_acquire_mode']}."
    if request["is_renew_ack"] and any(request[f] for f in ("max_wait_ms", "min_bytes", "max_bytes", "max_records",
                                                            "batch_size")):
        return "A ShareFetch with renew acknowledgements cannot fetch: its fetch parameters must be 0."
    return None


@handler(ApiKey.SHARE_FETCH, 1, 2)
async def share_fetch(ctx: RequestContext, request: dict) -> dict:
    group_id, member_id, epoch = request["group_id"], request["member_id"], request["share_session_epoch"]
    refused = refusal(ctx, request)
    if refused is not None:
        return _failed(*refused)
    invalid = _fetch_refusal(request)
    if invalid is not None:
        return _failed(ErrorCode.INVALID_REQUEST, invalid)
    coordinator = ctx.broker.coordinator.share_groups
    acks = acknowledgements(request)
    renew = bool(request["is_renew_ack"])
    if epoch == INITIAL_SESSION_EPOCH and acks:
        return _failed(ErrorCode.INVALID_REQUEST, "Acknowledgements are not allowed when opening a share session.")
    try:
        session = coordinator.begin_session(group_id, member_id, epoch, acknowledge_only=False)
    except ShareError as exc:
        return _failed(exc.error_code, exc.message)
    if epoch != FINAL_SESSION_EPOCH:
        for gone in request["forgotten_topics_data"] or ():
            for index in gone["partitions"]:
                session.partitions.discard((gone["topic_id"], index))
        for topic in request["topics"]:
            for part in topic["partitions"]:
                session.partitions.add((topic["topic_id"], part["partition_index"]))
    ack_results, durable = coordinator.acknowledge(group_id, member_id, acks, renew=renew)
    entries: dict[tuple[bytes, int], dict] = {tp: _entry(tp[1], ack_error=code) for tp, code in ack_results.items()}
    leaders: set[int] = set()  # named in leader hints (KIP-951)
    quotas = ctx.broker.quotas
    throttled = 0
    if quotas.enabled:  # over its consumer_byte_rate: nothing acquired until the throttle is over
        throttled = quotas.throttle_ms(FETCH_QUOTA, *ctx.quota_client, now_ms())
        ctx.throttle_ms = max(ctx.throttle_ms, throttled)
    fetched_bytes = 0
    if epoch == FINAL_SESSION_EPOCH:
        coordinator.release_member(group_id, member_id)
    elif request["max_bytes"] <= 0 or throttled:
        # Kafka answers a ShareFetch with max_bytes 0 (librdkafka's fetch.max.bytes=0) with no partitions at
        # all, after its wait; a throttled one gets its throttle time at once, its acknowledgements applied
        if not throttled and not acks:
            await asyncio.sleep(min(max(request["max_wait_ms"], 0), MAX_WAIT_CAP_MS) / 1000.0)
    elif not renew:
        max_wait_s = min(max(request["max_wait_ms"], 0), MAX_WAIT_CAP_MS) / 1000.0
        deadline = time.monotonic() + max_wait_s
        wanted = sorted(session.partitions)  # those with nothing to say are left out, as Kafka does
        while True:
            got, keys = _acquire(ctx, group_id, member_id, wanted, request, entries, leaders)
            remaining = deadline - time.monotonic()
            if got or remaining <= 0 or not ctx.connection.is_open:
                break
            if not keys:  # nothing to read yet (no partitions): wait like an empty fetch, not a busy loop
                if not acks:
                    await asyncio.sleep(remaining)
                break
            await ctx.broker.wait_for_append(keys, remaining)
        fetched_bytes = sum(len(e["records"]) for e in entries.values())
    if quotas.enabled and fetched_bytes:  # the records sent count against the client's consumer_byte_rate
        earned = quotas.record(FETCH_QUOTA, *ctx.quota_client, fetched_bytes, now_ms())
        if earned:
            # as Kafka does, a response that takes the member over its rate goes out without records, their
            # bytes not counted; the records are given back (their delivery counts as before)
            quotas.record(FETCH_QUOTA, *ctx.quota_client, -fetched_bytes, now_ms())
            coordinator.unacquire(group_id, member_id, {
                tp: [(r["first_offset"], r["last_offset"]) for r in e["acquired_records"]]
                for tp, e in entries.items() if e["acquired_records"]})
            for tp in [tp for tp, e in entries.items() if e["acquired_records"]]:
                if tp in ack_results:
                    entries[tp]["records"], entries[tp]["acquired_records"] = b"", []
                else:
                    del entries[tp]
            ctx.throttle_ms = max(ctx.throttle_ms, earned)
    for (_, topic_id, index), stored in durable.items():  # acknowledged means stored
        code = await asyncio.wrap_future(stored)
        if code and (topic_id, index) in entries:
            entries[(topic_id, index)]["acknowledge_error_code"] = code
    responses: dict[bytes, list[dict]] = {}
    for (topic_id, _), entry in sorted(entries.items()):
        responses.setdefault(topic_id, []).append(entry)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "acquisition_lock_timeout_ms": coordinator.lock_duration_ms(group_id),
            "responses": [{"topic_id": t, "partitions": parts} for t, parts in responses.items()],
            "node_endpoints": node_endpoints(ctx.broker.metadata, leaders, ctx.connection.listener) if leaders else []}


def _acquire(ctx: RequestContext, group_id: str, member_id: str, wanted: list[tuple[bytes, int]], request: dict,
             entries: dict[tuple[bytes, int], dict], leaders: set[int]) -> tuple[int, list[tuple[str, int]]]:
    """Read and acquire records of every wanted partition into ``entries`` (a partition led elsewhere names
    its leader, added to ``leaders``); returns (records acquired, (topic, partition) keys an append to which
    is worth waiting for)."""
    broker = ctx.broker
    coordinator = broker.coordinator.share_groups
    read_committed = coordinator.read_committed(group_id)
    lock_ms = coordinator.lock_duration_ms(group_id)
    remaining_bytes = min(request["max_bytes"], broker.config.int("fetch.max.bytes"))
    max_records = request["max_records"] if request["max_records"] > 0 else DEFAULT_MAX_RECORDS
    whole_batches = request["share_acquire_mode"] == BATCH_OPTIMIZED
    now = coordinator.scheduler.now_ms()
    taken = 0
    total_bytes = 0
    keys: list[tuple[str, int]] = []
    readable: dict[str, int] = {}  # topic name -> refusal code, asked once per topic
    for topic_id, index in wanted:
        topic = broker.metadata.topic_by_id(topic_id)
        if topic is None:
            entries[(topic_id, index)] = _entry(index, ErrorCode.UNKNOWN_TOPIC_ID)
            continue
        if topic.name not in readable:
            readable[topic.name] = 0 if ctx.allowed(Op.READ, Res.TOPIC, topic.name) else \
                ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if readable[topic.name]:
            entries[(topic_id, index)] = _entry(index, readable[topic.name])
            continue
        try:
            partition = broker.replicas.leader_partition(topic.name, index)
        except ReplicationError as exc:
            entries[(topic_id, index)] = refused = _entry(index, exc.error_code)
            if exc.error_code in LEADERSHIP_ERRORS:
                refused["current_leader"] = dict(NO_LEADER)
                hint_leader(broker.metadata, refused, topic.name, index, leaders)
            continue
        keys.append((topic.name, index))
        if taken >= max_records:
            continue
        plog = partition.log
        key = (group_id, topic_id, index)
        fresh = key not in coordinator.partitions
        try:
            sp = coordinator.share_partition(group_id, topic_id, index, plog.log_start_offset, plog.high_watermark,
                                             lambda ts: first_at_or_after(plog, ts)[0], partition.leader_epoch)
        except ShareError:  # its state is still being read from the share coordinator: wait for it
            continue
        sp.max_in_flight = coordinator.max_in_flight(group_id)  # the group's config, as it is now
        if fresh and taken:
            continue  # initialized by this request, read by the next (Kafka answers with what was ready first)
        sp.move_start(plog.log_start_offset)
        if sp.dirty:  # the log start moved: stored at once (a window that never held a record is not)
            coordinator.store([key])
        start = sp.next_fetch_offset()
        upper = plog.last_stable_offset if read_committed else plog.high_watermark
        if start is None or start >= upper:
            continue
        try:
            data = plog.read(start, max(remaining_bytes, 0), min_one_batch=(total_bytes == 0), max_offset=upper)
        except OffsetOutOfRangeError:
            continue  # the log start moved past it: the next look starts at the new log start
        data = bytes(data)
        aborted = plog.aborted_transactions(start, upper) if read_committed else []
        spans = []
        for pos, header in iter_batches(data):
            skip = header.is_control or (read_committed and header.is_transactional and any(
                t.producer_id == header.producer_id and t.first_offset <= header.base_offset <= t.last_offset
                for t in aborted))
            spans.append((pos, header.size, LogBatch(header.base_offset, header.last_offset, skip)))
        acquired = sp.acquire(member_id, [s[2] for s in spans], max_records - taken, now, lock_ms, whole_batches)
        if sp.dirty:  # a new window or archived records: stored, not waited for (a crash delivers again)
            coordinator.store([key])
        if not acquired:
            continue
        coordinator.acquired(key, sp)
        first, last = acquired[0][0], acquired[-1][1]
        # only the batches holding acquired records go out
        kept = [(pos, size) for pos, size, b in spans if b.last >= first and b.first <= last]
        records = data[kept[0][0]:kept[-1][0] + kept[-1][1]]
        entry = entries.get((topic_id, index)) or _entry(index)
        entry["records"] = records
        entry["acquired_records"] = [{"first_offset": f, "last_offset": la, "delivery_count": c}
                                     for f, la, c in acquired]
        entries[(topic_id, index)] = entry
        taken += sum(la - f + 1 for f, la, _ in acquired)
        total_bytes += len(records)
        remaining_bytes -= len(records)
    return taken, keys
