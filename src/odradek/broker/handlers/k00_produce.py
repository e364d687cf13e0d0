"""Produce (key 0), versions 0-13 (v13, KIP-516: topics named by id; an id the broker does not know →
UNKNOWN_TOPIC_ID for each of its partitions, as Kafka answers).

Per partition: the record set is validated (records/batch.py: sizes, magic, CRC32C, offset deltas,
`max.message.bytes` per batch; records/codec.py: every field of every record, as Kafka's LogValidator walks
them, CORRUPT_MESSAGE otherwise) and appended as produced; the broker patches only base offset and
partition leader epoch, both outside the CRC. A compressed batch is decompressed into a bounded buffer
(records/compression.py): records past 64 times its compressed size or `max.message.bytes`, whichever is
larger, → MESSAGE_TOO_LARGE (Kafka has no such bound; it streams). A LogAppendTime topic also stamps max
timestamp, which costs one CRC pass. Versions 0-2 carry legacy MessageSets (magic 0/1): they are up-converted to one v2
batch first (records/legacy.py); from v3 only magic 2 is accepted (INVALID_RECORD otherwise).

Only the partition's leader appends (cluster/replica_manager.py): elsewhere NOT_LEADER_OR_FOLLOWER (from
v10 with the leader this broker knows of and its endpoint: KIP-951, broker/leader_hints.py), or
UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have. The leader stamps its leader epoch on
every batch.

acks: 0 → no response at all; 1 → answered after the local append; -1 (all) → answered once every in-sync
replica has the records (the partition's high watermark passes them; on a single node, or with an ISR of
one, at once), or REQUEST_TIMED_OUT when `timeout_ms` passes first, or NOT_LEADER_OR_FOLLOWER when
leadership moves meanwhile (the new leader may not have them: the producer retries). With acks=-1 an ISR
smaller than the topic's `min.insync.replicas` refuses the write (NOT_ENOUGH_REPLICAS, nothing written); an
ISR that shrank below it while waiting → NOT_ENOUGH_REPLICAS_AFTER_APPEND. The flush policy
(`log.flush.interval.messages`/`.ms`) decides when the data is fsynced; when an append makes it flush, the
answer waits for that fsync too, which runs on the log flusher's thread while the loop serves other
connections (the handler then returns a coroutine); a failed fsync → KAFKA_STORAGE_ERROR for that
partition. Any other acks value → INVALID_REQUIRED_ACKS for every partition, nothing written.

Idempotent producers (batches with a producer id, from InitProducerId): the partition's producer state
(storage/producer_state.py) checks epoch and sequence of every batch, in order, before anything of the
record set is written. A retry of one of the producer's last 5 batches is answered with error NONE and the
ORIGINAL base offset, and nothing is written (Kafka's handling of DUPLICATE_SEQUENCE_NUMBER; the code itself
is never sent). An older epoch → INVALID_PRODUCER_EPOCH (the fenced zombie); a gap in the sequence, or a new
epoch that does not start at 0 → OUT_OF_ORDER_SEQUENCE_NUMBER; a producer id with a negative epoch or
sequence → INVALID_RECORD. A producer id the partition does not know is accepted at any sequence (Kafka
since KIP-360, so UNKNOWN_PRODUCER_ID is never returned). Record sets without producer ids skip all this.

Errors: UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
UNSUPPORTED_COMPRESSION_TYPE, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, KAFKA_STORAGE_ERROR (an
OSError from the log).
A topic whose `compression.type` names a codec (`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`) stores its
batches in it: those that arrive in another are recompressed (records/codec.py `recompress`) on a worker
thread, producer fields and timestamps kept; `producer` (the default) stores them as sent.
Transactional batches are checked like idempotent ones and open the producer's transaction in the
partition (holding back the last stable offset until the coordinator's marker); a producer fenced by an
epoch bump gets INVALID_PRODUCER_EPOCH. Control batches are written only by the transaction coordinator: a
produced one → INVALID_RECORD.
Before a producer's first transactional write to a partition in a transaction (its producer state there has
no open transaction at that epoch), the partition asks the transaction's coordinator (KIP-890,
`Broker.in_transaction`): v12 (transactions v2) asks it to add the partition to the transaction, which the
producer no longer does itself; older versions, with `transaction.partition.verification.enable` (the
default), whether the producer added it, so that a write delayed past the end of its transaction cannot open
a new one. Not in the transaction → TRANSACTION_ABORTABLE (v11+; INVALID_TXN_STATE before), a stale epoch →
INVALID_PRODUCER_EPOCH, an unknown producer → INVALID_PRODUCER_ID_MAPPING; a coordinator that is moving or
unreachable → NOT_ENOUGH_REPLICAS, which producers retry, and so is one that is busy with another change of
the transaction (CONCURRENT_TRANSACTIONS) before v12. A v12 add waits for that change (up to 5 s: a v2
producer's first writes to several partitions reach their leaders at once, each adding its partition;
Kafka's brokers retry the add) and, if it is still busy, gets CONCURRENT_TRANSACTIONS itself, as from Kafka.
Nothing of a refused partition is written.
Compacted topics (`cleanup.policy` holding `compact`, also when set later by (Incremental)AlterConfigs,
read per request): a record set with a record whose key is null → INVALID_RECORD for the partition, nothing
written, as Kafka does, with each keyless record of the batch named in `record_errors` (KIP-467, v8+: the
client fails those records and retries the others) and Kafka's error message; the check walks each record's
header varints (records/codec.py `keyless_record_indexes`, on a worker thread with the other checks of a
large compressed set), and other topics skip it. The log cleaner: storage/cleaner.py, docs/compaction.md.
"""

import asyncio
import logging
import struct
from concurrent.futures import Future

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.core import now_ms, when_durable
from odradek.broker.leader_hints import LEADERSHIP_ERRORS, hint_leader, node_endpoints
from odradek.broker.registry import handler
from odradek.cluster.partition import ReplicationError, durable_and_committed
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.records import legacy
from odradek.records.batch import BatchHeader, InvalidRecordError, set_log_append_time
from odradek.records.codec import keyless_record_indexes, recompress, validate_produced
from odradek.records.compression import COMPRESSION_TYPES
from odradek.storage.producer_state import (
    InvalidProducerEpochError,
    InvalidProducerFieldsError,
    OutOfOrderSequenceError,
    ProducerStateError,
)

log = logging.getLogger(__name__)


_PRODUCER_ERRORS = {
    InvalidProducerEpochError: ErrorCode.INVALID_PRODUCER_EPOCH,
    OutOfOrderSequenceError: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    InvalidProducerFieldsError: ErrorCode.INVALID_RECORD,
}


# A compressed record set at least this big is checked on a worker thread: decompressing it (cramjam releases
# the GIL) takes long enough that other connections would feel it, and the hand-off costs far less.
CHECK_OFF_LOOP_MIN_BYTES = 64 * 1024
_PRODUCER = struct.Struct(">qh")
ZERO_UUID = bytes(16)

Checked = tuple[bytearray | memoryview, list[tuple[int, BatchHeader]]] | InvalidRecordError


# What the coordinator's answer becomes for the producer: retriable codes for a coordinator that is busy or
# moving (Kafka's mapping), the producer's own errors as they are.
_COORDINATOR_RETRIABLE = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}


@handler(ApiKey.PRODUCE, 0, 13)
def produce(ctx: RequestContext, request: dict):
    if ctx.api_version >= 13:
        _names_from_ids(ctx, request)
    if request["acks"] in (0, 1, -1):
        if ctx.api_version >= 3 and request["transactional_id"] is not None:
            first_writes = _first_transactional_writes(ctx, request)
            if first_writes:
                return _produce_in_transaction(ctx, request, first_writes)
        heavy = _heavy(ctx, request)
        if heavy:
            return _produce_after_checks(ctx, request, heavy)
    return _produce(ctx, request, {})


def _names_from_ids(ctx: RequestContext, request: dict) -> None:
    """v13 (KIP-516) names topics by id: each entry takes its topic's name, or None for an id the broker does
    not know (its partitions are answered UNKNOWN_TOPIC_ID, as Kafka answers them)."""
    metadata = ctx.broker.metadata
    for topic in request["topic_data"]:
        found = metadata.topic_by_id(topic["topic_id"])
        topic["name"] = found.name if found is not None else None


def _heavy(ctx: RequestContext, request: dict) -> list[tuple[str, int, bytes]]:
    return [(topic["name"], part["index"], part["records"])
            for topic in request["topic_data"] for part in topic["partition_data"]
            if topic["name"] is not None
            and (_is_heavy(part["records"]) or _stored_codec(ctx, topic["name"]) is not None)]


def _first_transactional_writes(ctx: RequestContext, request: dict) -> dict[tuple[str, int], tuple[int, int]]:
    """The partitions this request writes a transaction's first batch of the producer to, with its producer id
    and epoch: those the coordinator must confirm (or, v12, add) first."""
    add = ctx.api_version >= 12
    if not add and not ctx.broker.config.get("transaction.partition.verification.enable"):
        return {}
    out = {}
    replicas = ctx.broker.replicas
    for topic in request["topic_data"]:
        if topic["name"] is None:
            continue  # an unknown topic id (v13)
        for part in topic["partition_data"]:
            records = part["records"]
            # magic at byte 16, attributes (bit 4: transactional) at 21-22, producer id and epoch at 43-53
            if not records or len(records) < 61 or records[16] != 2 or not records[22] & 0x10:
                continue
            producer_id, epoch = _PRODUCER.unpack_from(records, 43)
            partition = replicas.partition(topic["name"], part["index"])
            if partition is None or not partition.is_leader:
                continue  # refused as it would be anyway
            entry = partition.log.producer_state.entry(producer_id)
            if entry is None or entry.epoch != epoch or entry.txn_first_offset < 0:
                out[(topic["name"], part["index"])] = (producer_id, epoch)
    return out


async def _produce_in_transaction(ctx: RequestContext, request: dict,
                                  first_writes: dict[tuple[str, int], tuple[int, int]]):
    """Ask the coordinator about the partitions of ``first_writes``, then produce what it let through."""
    add = ctx.api_version >= 12
    by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for tp, producer in first_writes.items():
        by_producer.setdefault(producer, []).append(tp)
    answered: dict[tuple[str, int], int] = {}
    txn_id = request["transactional_id"]
    for (producer_id, epoch), partitions in by_producer.items():
        answers = await ctx.broker.in_transaction(txn_id, producer_id, epoch, partitions, add)
        for tp, error in answers.items():
            if error == ErrorCode.CONCURRENT_TRANSACTIONS and add:
                answered[tp] = error  # Kafka 4.4 hands a v2 producer the code itself: it retries it
            elif error in _COORDINATOR_RETRIABLE:
                answered[tp] = ErrorCode.NOT_ENOUGH_REPLICAS
            elif error == ErrorCode.INVALID_TXN_STATE:
                answered[tp] = ErrorCode.TRANSACTION_ABORTABLE if ctx.api_version >= 11 else ErrorCode.INVALID_TXN_STATE
            elif error:
                answered[tp] = error
    heavy = [h for h in _heavy(ctx, request) if (h[0], h[1]) not in answered]
    if heavy:
        return await _produce_after_checks(ctx, request, heavy, answered)
    body = _produce(ctx, request, {}, answered)
    return await body if asyncio.iscoroutine(body) else body


def _stored_codec(ctx: RequestContext, topic_name: str) -> int | None:
    """The codec the topic's compression.type stores batches in; None for "producer" (as sent)."""
    topic = ctx.broker.metadata.topic(topic_name)
    if topic is None:
        return None
    return COMPRESSION_TYPES.get(ctx.broker.effective_configs(topic)["compression.type"])


def _is_compacted(ctx: RequestContext, topic_name: str) -> bool:
    topic = ctx.broker.metadata.topic(topic_name)
    return topic is not None and "compact" in ctx.broker.effective_configs(topic)["cleanup.policy"]


def _is_heavy(records) -> bool:
    # magic at byte 16 and the codec bits at byte 22 of the first batch; legacy sets are small in practice
    return records is not None and len(records) >= CHECK_OFF_LOOP_MIN_BYTES and records[16] == 2 and records[22] & 7


async def _produce_after_checks(ctx: RequestContext, request: dict, heavy: list[tuple[str, int, bytes]],
                                answered: dict[tuple[str, int], int] | None = None):
    """Check the heavy record sets on worker threads (in parallel), then append everything in order."""
    loop = asyncio.get_running_loop()
    keys, checks = [], []
    for name, index, records in heavy:
        max_bytes = _max_batch_bytes(ctx, name, index)
        if max_bytes is not None:
            keys.append((name, index))
            checks.append(loop.run_in_executor(None, _check_or_error, records, ctx.api_version, max_bytes,
                                               _stored_codec(ctx, name), _is_compacted(ctx, name)))
    checked = dict(zip(keys, await asyncio.gather(*checks)))
    body = _produce(ctx, request, checked, answered)
    return await body if asyncio.iscoroutine(body) else body


def _produce(ctx: RequestContext, request: dict, checked: dict[tuple[str, int], Checked],
             answered: dict[tuple[str, int], int] | None = None):
    """The response body (None for acks=0), or a coroutine giving it once the flushes it needs are done.
    ``answered``: partitions already answered with an error (the transaction's coordinator said no)."""
    acks = request["acks"]
    responses = []
    waits: list[tuple[dict, Future]] = []
    txn_id = request["transactional_id"] if ctx.api_version >= 3 else None
    refused = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
               if txn_id is not None and not ctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id) else None)
    for topic in request["topic_data"]:
        name = topic["name"]
        partitions = []
        denied = refused or (None if name is None or ctx.allowed(Op.WRITE, Res.TOPIC, name)
                             else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for part in topic["partition_data"]:
            if name is None:  # a refused transactional id answers every partition, known or not, as in Kafka
                result = _result(part["index"], refused or ErrorCode.UNKNOWN_TOPIC_ID)
            elif denied:
                result = _result(part["index"], denied)
            elif acks not in (0, 1, -1):
                result = _result(part["index"], ErrorCode.INVALID_REQUIRED_ACKS)
            elif answered and (name, part["index"]) in answered:
                result = _result(part["index"], answered[(name, part["index"])])
            else:
                result = _append(ctx, name, part["index"], part["records"], acks, waits,
                                 checked.get((name, part["index"])))
            partitions.append(result)
        responses.append({"name": name or "", "topic_id": topic.get("topic_id", ZERO_UUID),
                          "partition_responses": partitions})
    if acks == 0:
        return None
    body = when_durable({"responses": responses, "throttle_time_ms": 0}, waits, _not_acknowledged,
                        max(request["timeout_ms"], 0) / 1000.0)
    if ctx.api_version < 10:
        return body
    if type(body) is dict:
        return _with_leader_hints(ctx, body)
    return _with_leader_hints_later(ctx, body)


def _with_leader_hints(ctx: RequestContext, body: dict) -> dict:
    """KIP-951 (broker/leader_hints.py): the leader of every partition refused for want of leadership."""
    leaders: set[int] = set()
    metadata = ctx.broker.metadata
    for topic in body["responses"]:
        for part in topic["partition_responses"]:
            if part["error_code"] in LEADERSHIP_ERRORS:
                hint_leader(metadata, part, topic["name"], part["index"], leaders)
    if leaders:
        body["node_endpoints"] = node_endpoints(metadata, leaders, ctx.connection.listener)
    return body


async def _with_leader_hints_later(ctx: RequestContext, waiting) -> dict:
    # leadership may move while acks=all waits: the hint is taken when the answer is
    return _with_leader_hints(ctx, await waiting)


def _not_acknowledged(result: dict, exc: BaseException) -> None:
    if isinstance(exc, TimeoutError):
        code, message = ErrorCode.REQUEST_TIMED_OUT, "the in-sync replicas did not all get the records in time"
    elif isinstance(exc, ReplicationError):
        code, message = exc.error_code, str(exc)
    else:
        code, message = ErrorCode.KAFKA_STORAGE_ERROR, f"fsync failed: {exc}"
    result.update(error_code=code, error_message=message, base_offset=-1, log_append_time_ms=-1)


def _result(index: int, error: int, message: str | None = None, base_offset: int = -1,
            log_append_time_ms: int = -1, log_start_offset: int = -1) -> dict:
    return {
        "index": index,
        "error_code": error,
        "base_offset": base_offset,
        "log_append_time_ms": log_append_time_ms,
        "log_start_offset": log_start_offset,
        "record_errors": [],
        "error_message": message,
    }


KEYLESS_IN_COMPACTED = "Compacted topic cannot accept message without key in topic partition {}"


def _record_errors(topic_name: str, index: int, refused: InvalidRecordError, log_start_offset: int) -> dict:
    """A partition refused for some of its records (KIP-467, v8+): each named in record_errors with its
    message, and the partition's error message listing the first three, in Kafka's words; the log start
    offset is reported as Kafka does for a record it rejects."""
    message = str(refused).format(f"{topic_name}-{index}")
    errors = [{"batch_index": i, "batch_index_error_message": message} for i in refused.record_indexes]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in refused.record_indexes[:3])
    result = _result(index, refused.error_code,
                     f"One or more records have been rejected due to {len(errors)} record errors in total, and "
                     f"only showing the first three errors at most: [{shown}]", log_start_offset=log_start_offset)
    result["record_errors"] = errors
    return result


def _max_batch_bytes(ctx: RequestContext, topic_name: str, index: int) -> int | None:
    """The topic's max.message.bytes, or None when this broker does not lead the partition."""
    broker = ctx.broker
    if broker.replicas.partition(topic_name, index) is None:
        return None
    return int(broker.effective_configs(broker.metadata.topic(topic_name))["max.message.bytes"])


def _check_or_error(records: bytes | memoryview, api_version: int, max_bytes: int,
                    stored_codec: int | None = None, compacted: bool = False) -> Checked:
    """The record set as a v2 buffer with its validated batches, or the error that refuses it. The buffer
    is ``records`` itself when that is writable (a view of the request's own frame: net/connection.py), so
    the offsets are patched in place; otherwise a copy. With ``stored_codec`` (the topic's compression.type),
    batches in another codec are recompressed into it (a new buffer, checked again).

    Touches no broker state, so it may run on a worker thread."""
    try:
        magic = legacy.detect_magic(records)
        budget = None  # what compressed batches may decompress to: validate_produced's own bound
        if magic == 2:
            buf = records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
        elif api_version >= 3:
            raise InvalidRecordError(ErrorCode.INVALID_RECORD, f"Produce v{api_version} requires magic 2, got {magic}")
        else:
            buf = legacy.upconvert(records, now_ms=now_ms(), max_batch_bytes=max_bytes)
            budget = legacy.upconverted_budget(len(records), max_bytes)
        batches = validate_produced(buf, max_bytes, decompressed_budget=budget)
        if any(header.is_control for _, header in batches):
            raise InvalidRecordError(ErrorCode.INVALID_RECORD, "control batches may not be produced")
        keyless = keyless_record_indexes(buf, batches) if compacted else None
        if keyless:
            # Kafka's LogValidator: a compacted topic takes only keyed records; nothing of the set is written
            raise InvalidRecordError(ErrorCode.INVALID_RECORD, KEYLESS_IN_COMPACTED, keyless)
        if stored_codec is not None and any(header.compression != stored_codec for _, header in batches):
            buf = recompress(buf, batches, stored_codec)
            batches = validate_produced(buf, max_bytes)
    except InvalidRecordError as exc:
        return exc
    return buf, batches


def _append(ctx: RequestContext, topic_name: str, index: int, records, acks: int, waits: list[tuple[dict, Future]],
            checked: Checked | None = None) -> dict:
    """Append one partition's record set (``checked``: already checked off the loop); its result, with what
    it must wait for (the flush, and with acks=-1 the ISR) added to ``waits``."""
    broker = ctx.broker
    try:
        partition = broker.replicas.leader_partition(topic_name, index)
    except ReplicationError as exc:
        return _result(index, exc.error_code, str(exc))
    configs = broker.effective_configs(broker.metadata.topic(topic_name))
    if not records:
        return _result(index, ErrorCode.CORRUPT_MESSAGE, "empty record set")
    min_isr = int(configs["min.insync.replicas"]) if acks == -1 else 0
    if len(partition.isr) < min_isr:
        return _result(index, ErrorCode.NOT_ENOUGH_REPLICAS,
                       f"{len(partition.isr)} in-sync replicas, min.insync.replicas is {min_isr}")
    if checked is None:
        checked = _check_or_error(records, ctx.api_version, int(configs["max.message.bytes"]),
                                  COMPRESSION_TYPES.get(configs["compression.type"]),
                                  "compact" in configs["cleanup.policy"])
    if isinstance(checked, InvalidRecordError):
        if checked.record_indexes:
            return _record_errors(topic_name, index, checked, partition.log.log_start_offset)
        return _result(index, checked.error_code, str(checked))
    buf, batches = checked
    append_time = -1
    log_append = configs["message.timestamp.type"] == "LogAppendTime"
    if log_append:
        append_time = now_ms()
        for pos, header in batches:
            set_log_append_time(buf, pos, header, append_time)
    plog = partition.log
    try:
        appended = partition.append_as_leader(buf, batches)
    except ProducerStateError as exc:
        log.debug("produce to %s-%d refused: %s", topic_name, index, exc)
        # Kafka names the log start with an idempotent producer's refusal, not a transactional one's (refused
        # before the log, by its transaction verification)
        transactional = any(header.is_transactional for _, header in batches)
        return _result(index, _PRODUCER_ERRORS[type(exc)], str(exc),
                       log_start_offset=-1 if transactional else partition.log.log_start_offset)
    except OSError as exc:
        log.error("append to %s-%d failed: %s", topic_name, index, exc)
        return _result(index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
    if appended.duplicate:
        # the retry of a stored batch: Kafka answers with the stored batch's max timestamp, whatever the
        # topic's timestamp type
        append_time = appended.first_batch_max_timestamp
    elif broker.metrics is not None:  # the records: the offsets the batches took, as headers say; no record read
        broker.metrics.produced(topic_name, appended.last_offset - appended.base_offset + 1, len(records))
    result = _result(index, ErrorCode.NONE, None, appended.base_offset, append_time, plog.log_start_offset)
    committed = partition.when_committed(appended.last_offset + 1, min_isr) if acks == -1 else None
    wait = durable_and_committed(appended.durable, committed)
    if wait is not None:
        waits.append((result, wait))
    return result
