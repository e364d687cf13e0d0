"""DeleteRecords (key 21), versions 0-2.

Moves a partition's log start offset forward to `offset` (-1 means the high watermark); whole segments
below it are deleted, and the checkpointed start offset survives restarts. Reads below the new start get
OFFSET_OUT_OF_RANGE. An offset beyond the high watermark → OFFSET_OUT_OF_RANGE; unknown partition →
UNKNOWN_TOPIC_OR_PARTITION. The reply's low watermark is the new log start offset.
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.storage.log import OffsetOutOfRangeError


@handler(ApiKey.DELETE_RECORDS, 0, 2)
def delete_records(ctx: RequestContext, request: dict) -> dict:
    topics = []
    for topic in request["topics"]:
        partitions = []
        for part in topic["partitions"]:
            index = part["partition_index"]
            plog = ctx.broker.partition_log(topic["name"], index)
            if plog is None:
                partitions.append({"partition_index": index, "low_watermark": -1,
                                   "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
                continue
            offset = part["offset"]
            if offset == -1:
                offset = plog.log_end_offset
            try:
                if offset < 0:
                    raise OffsetOutOfRangeError(offset, plog.log_start_offset, plog.log_end_offset)
                low = plog.delete_records_before(offset)
            except OffsetOutOfRangeError:
                partitions.append({"partition_index": index, "low_watermark": -1,
                                   "error_code": ErrorCode.OFFSET_OUT_OF_RANGE})
                continue
            partitions.append({"partition_index": index, "low_watermark": low, "error_code": 0})
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
