"""Partition logs on disk in Kafka's format: segments, offset and time indexes, recovery, retention, flush,
compaction (cleaner.py, cleaned_segments.py).

Knows nothing of the wire protocol: batches arrive validated (``records.batch.validate_v2``) and leave as
bytes.
"""

from .config import LogConfig
from .errors import OffsetOutOfRangeError, StorageError
from .log import AppendResult, PartitionLog
from .manager import LogManager

__all__ = [
    "AppendResult",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "StorageError",
]
