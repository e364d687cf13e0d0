"""Produce (key 0), versions 0-11.

Per partition: the record set is validated (records/batch.py: sizes, magic, CRC32C, offset deltas,
`max.message.bytes` per batch) and appended as produced; the broker patches only base offset and
partition leader epoch, both outside the CRC. A LogAppendTime topic also stamps max timestamp, which
costs one CRC pass. Versions 0-2 carry legacy MessageSets (magic 0/1): they are up-converted to one v2
batch first (records/legacy.py); from v3 only magic 2 is accepted (INVALID_RECORD otherwise).

acks: 0 → no response at all; 1 and -1 → answered after the append (a single node is the whole ISR; the
flush policy, `log.flush.interval.messages`/`.ms`, decides when the data is fsynced). Any other value →
INVALID_REQUIRED_ACKS for every partition, nothing written.

Errors: UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
UNSUPPORTED_COMPRESSION_TYPE, KAFKA_STORAGE_ERROR (an OSError from the log).
Gaps: idempotent and transactional producers (producer id / sequence checks) are not implemented yet, so
InitProducerId is not advertised and clients do not send producer ids.
"""

import logging

from odradek.broker.core import RequestContext, now_ms
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.records import legacy
from odradek.records.batch import InvalidRecordError, patch_leader_epoch, set_log_append_time
from odradek.records.codec import validate_produced

log = logging.getLogger(__name__)

LEADER_EPOCH = 0


@handler(ApiKey.PRODUCE, 0, 11)
def produce(ctx: RequestContext, request: dict) -> dict | None:
    acks = request["acks"]
    responses = []
    for topic in request["topic_data"]:
        name = topic["name"]
        partitions = []
        for part in topic["partition_data"]:
            if acks not in (0, 1, -1):
                result = _result(part["index"], ErrorCode.INVALID_REQUIRED_ACKS)
            else:
                result = _append(ctx, name, part["index"], part["records"])
            partitions.append(result)
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


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


def _append(ctx: RequestContext, topic_name: str, index: int, records) -> dict:
    broker = ctx.broker
    partition_log = broker.partition_log(topic_name, index)
    if partition_log is None:
        return _result(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    topic = broker.topics.get(topic_name)
    configs = broker.effective_configs(topic)
    max_bytes = int(configs["max.message.bytes"])
    if not records:
        return _result(index, ErrorCode.CORRUPT_MESSAGE, "empty record set")
    try:
        magic = legacy.detect_magic(records)
        if magic == 2:
            buf = bytearray(records)
        elif ctx.api_version >= 3:
            raise InvalidRecordError(ErrorCode.INVALID_RECORD, f"Produce v{ctx.api_version} requires magic 2, got {magic}")
        else:
            buf = legacy.upconvert(records, now_ms=now_ms())
        batches = validate_produced(buf, max_bytes)
    except InvalidRecordError as exc:
        return _result(index, exc.error_code, str(exc))
    append_time = -1
    log_append = configs["message.timestamp.type"] == "LogAppendTime"
    if log_append:
        append_time = now_ms()
    for pos, header in batches:
        patch_leader_epoch(buf, pos, LEADER_EPOCH)
        if log_append:
            set_log_append_time(buf, pos, header, append_time)
    try:
        appended = partition_log.append(buf, batches)
    except OSError as exc:
        log.error("append to %s-%d failed: %s", topic_name, index, exc)
        return _result(index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
    broker.notify_append(topic_name, index)
    return _result(index, ErrorCode.NONE, None, appended.base_offset, append_time, partition_log.log_start_offset)
