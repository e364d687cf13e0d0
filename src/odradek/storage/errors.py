"""The errors a partition log raises to its callers (log.py, log_maintenance.py)."""

from __future__ import annotations


class OffsetOutOfRangeError(Exception):
    """A read or DeleteRecords offset outside [log_start_offset, log_end_offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class StorageError(OSError):
    """The log cannot serve the request (closed, or left inconsistent by an I/O error)."""


class OffsetsOutOfOrderError(ValueError):
    """A follower's append whose batches do not continue the log: a base offset below the log end offset,
    or offsets that do not increase. Nothing was written. ``first_offset``/``last_offset`` are those of the
    offending batch, ``log_end_offset`` the least base offset it could have had."""

    def __init__(self, first_offset: int, last_offset: int, log_end_offset: int) -> None:
        super().__init__(f"batch at offsets [{first_offset}, {last_offset}] does not follow offset "
                         f"{log_end_offset - 1}")
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_end_offset = log_end_offset
