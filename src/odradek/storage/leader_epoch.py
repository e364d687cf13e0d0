"""The leader epoch cache of one partition (KIP-101): where each leader epoch's records start in the log.

A follower that (re)joins asks the leader where the epoch of its own last records ended
(OffsetForLeaderEpoch) and truncates what lies past that point: records no one else has, written by an old
leader that lost them in an election. The answer comes from this cache, on either side.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path
from typing import Callable, Iterable

from .files import write_file_atomically

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

Writer = Callable[[Path, bytes], object]


class LeaderEpochCache:
    """(epoch, start offset) pairs of one partition, ascending in both, kept in ``leader-epoch-checkpoint``.

    An entry says: the records from ``start_offset`` up to the next entry's start were written by the leader
    of ``epoch``. The log assigns an entry whenever it writes a batch whose partition_leader_epoch is newer
    than the latest one (``PartitionLog``), a new leader assigns its epoch at its log end, and log truncation
    at either end trims the entries (``truncate_from_end`` / ``truncate_from_start``).

    Byte layout of ``leader-epoch-checkpoint`` (Kafka's format): ASCII text, ``\\n`` after every line::

        0\\n                        format version
        2\\n                        number of entries
        0 0\\n                      "<epoch> <start_offset>", one line per entry, ascending
        3 1234\\n

    It is rewritten whole whenever the entries change, atomically (``.tmp``, fsync, rename, directory fsync:
    ``files.write_file_atomically``). Every change goes through ``writer(path, content)``; a PartitionLog
    makes that a job of its log flusher, so the event loop does not wait for the fsyncs (the jobs run in
    order, and the content is encoded when the change is made). A missing or unreadable file reads as None
    (``read``): the loader then rebuilds the entries from the batch headers.

    Concurrency: not thread-safe; owned by the event loop (through PartitionLog), and by its loader before
    that. The writer's content is immutable bytes, so it may be written on another thread.
    """

    FILE_NAME = "leader-epoch-checkpoint"
    VERSION = 0

    def __init__(self, directory: Path, entries: Iterable[tuple[int, int]] = (), *,
                 writer: Writer = write_file_atomically) -> None:
        self.path = directory / self.FILE_NAME
        self.writer = writer
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self.latest_epoch = UNDEFINED_EPOCH  # a plain attribute: the append path compares against it
        for epoch, start in entries:
            self.assign(epoch, start, persist=False)

    # -- the file ---------------------------------------------------------------------------------------

    @classmethod
    def read(cls, directory: Path) -> list[tuple[int, int]] | None:
        """The entries in ``directory``'s checkpoint, or None when it is missing or unreadable."""
        path = directory / cls.FILE_NAME
        try:
            lines = path.read_text("ascii").split("\n")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            return None
        try:
            if int(lines[0]) != cls.VERSION:
                raise ValueError(f"version {lines[0]}")
            count = int(lines[1])
            entries = []
            for line in lines[2:2 + count]:
                epoch, start = map(int, line.split(" "))
                if epoch < 0 or start < 0:
                    raise ValueError(f"negative entry {line!r}")
                entries.append((epoch, start))
            if len(entries) != count or any(line for line in lines[2 + count:]):
                raise ValueError(f"{len(entries)} entries and trailing text, {count} announced")
        except (ValueError, IndexError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            return None
        return entries

    def encode(self) -> bytes:
        lines = [str(self.VERSION), str(len(self._epochs))]
        lines += [f"{epoch} {start}" for epoch, start in zip(self._epochs, self._starts)]
        return ("\n".join(lines) + "\n").encode("ascii")

    def flush(self) -> None:
        """Write the entries as they are now (through ``writer``)."""
        self.writer(self.path, self.encode())

    # -- state ------------------------------------------------------------------------------------------

    @property
    def entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs, ascending."""
        return list(zip(self._epochs, self._starts))

    @property
    def earliest_epoch(self) -> int:
        return self._epochs[0] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_start(self) -> int:
        return self._starts[0] if self._starts else UNDEFINED_EPOCH_OFFSET

    @property
    def latest_start(self) -> int:
        return self._starts[-1] if self._starts else UNDEFINED_EPOCH_OFFSET

    def __len__(self) -> int:
        return len(self._epochs)

    def epoch_for(self, offset: int) -> int:
        """The epoch of the leader that wrote ``offset`` (-1 when it is below the first entry)."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    # -- changes ----------------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether the entries changed.

        Ignored when ``epoch`` is older than the latest one, or is the latest one and ``start_offset`` is not
        earlier than its start (the earlier start is kept). Entries whose start is at or past
        ``start_offset`` are removed first, so both columns stay increasing. Negative values raise
        ValueError. Persisted when changed (unless ``persist`` is False: the loader flushes once at the end).
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if not self._assign(epoch, start_offset):
            return False
        if persist:
            self.flush()
        return True

    def _assign(self, epoch: int, start_offset: int) -> bool:
        latest = self.latest_epoch
        if epoch < latest or (epoch == latest and start_offset >= self._starts[-1]):
            return False
        epochs, starts = self._epochs, self._starts
        removed = 0
        while starts and (starts[-1] >= start_offset or epochs[-1] >= epoch):
            epochs.pop()
            starts.pop()
            removed += 1
        if removed and not (removed == 1 and epoch == latest):
            log.warning("%s: epoch %d at %d replaced %d entries", self.path, epoch, start_offset, removed)
        epochs.append(epoch)
        starts.append(start_offset)
        self.latest_epoch = epoch
        return True

    def truncate_from_end(self, end_offset: int, *, persist: bool = True) -> bool:
        """The log was cut back to ``end_offset``: drop the entries starting at or past it. Returns whether
        anything was dropped (persisted then, unless ``persist`` is False)."""
        n = len(self._starts)
        while n and self._starts[n - 1] >= end_offset:
            n -= 1
        if n == len(self._starts):
            return False
        del self._epochs[n:]
        del self._starts[n:]
        self.latest_epoch = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH
        if persist:
            self.flush()
        return True

    def truncate_from_start(self, start_offset: int, *, persist: bool = True) -> bool:
        """The log start moved to ``start_offset``: the entry covering it now starts there, and the entries
        wholly below it are dropped (an entry starting exactly at ``start_offset`` stays as it is). Returns
        whether anything changed (persisted then, unless ``persist`` is False)."""
        i = bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return False
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = start_offset
        if persist:
            self.flush()
        return True

    def clear_and_flush(self) -> None:
        """Forget every entry (the log restarts empty) and write the empty checkpoint."""
        self._epochs.clear()
        self._starts.clear()
        self.latest_epoch = UNDEFINED_EPOCH
        self.flush()

    # -- OffsetForLeaderEpoch ---------------------------------------------------------------------------

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's leader epoch cache answers it.

        * the latest epoch: (it, ``log_end_offset``);
        * an epoch below the latest: (the largest known epoch <= it, the start offset of the first epoch
          after it); when no known epoch is <= it (its records were deleted), (``requested_epoch``, the
          first entry's start), so the follower keeps nothing the leader no longer has;
        * -1, an epoch above the latest, or an empty cache: (-1, -1), UNDEFINED: the follower falls back
          to its high watermark.
        """
        epochs = self._epochs
        if requested_epoch == UNDEFINED_EPOCH or not epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return epochs[higher - 1], self._starts[higher]

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries})"
