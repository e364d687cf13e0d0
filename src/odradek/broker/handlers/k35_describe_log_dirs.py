"""DescribeLogDirs (key 35), versions 0-5.

A broker has one log directory, its data directory (`--data-dir`): the answer is that directory (its
absolute path) with, for each partition it holds a log of, the log's size in bytes (every segment),
`offset_lag` as Kafka computes it for a current (non-future) replica (the high watermark minus the log end
offset, never below 0) and `is_future_key` false (no replica ever moves between directories here).
`topics` null asks for every partition; named partitions this broker has no log of are left out, as Kafka
leaves them out. v4+ adds the directory's `total_bytes` and `usable_bytes` (the file system's size and
what is free there). v3+ has a top-level error code (always NONE). v5 adds `is_cordoned` (KIP-1066: a
directory the operator closed to new replicas): always false, odradek has no cordoning.
"""

import os
import shutil

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.DESCRIBE_LOG_DIRS, 0, 5)
def describe_log_dirs(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    if not ctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    logs = broker.logs.logs()
    if request["topics"] is None:
        wanted = sorted(logs)
    else:
        wanted = sorted({(t["topic"], p) for t in request["topics"] for p in t["partitions"]} & set(logs))
    by_topic: dict[str, list] = {}
    for topic, index in wanted:
        plog = logs[(topic, index)]
        by_topic.setdefault(topic, []).append({
            "partition_index": index, "partition_size": plog.size_in_bytes,
            "offset_lag": max(plog.high_watermark - plog.log_end_offset, 0), "is_future_key": False})
    directory = os.path.abspath(broker.data_dir)
    try:
        usage = shutil.disk_usage(directory)
        total, usable = usage.total, usage.free
    except OSError:
        total = usable = -1
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": [{
        "error_code": ErrorCode.NONE, "log_dir": directory,
        "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
        "total_bytes": total, "usable_bytes": usable, "is_cordoned": False}]}
