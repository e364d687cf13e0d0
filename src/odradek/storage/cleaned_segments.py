"""What a cleaning of the log cleaner (cleaner.py) hands to the log and leaves on disk, and how it becomes the
log: the cleaned groups, the swap that puts them in place of the segments they replace (crash-safe at every
step), its completion by the loader after a crash, and the cleaner's offset checkpoint. Below both the log
(log.py, which swaps) and the cleaner (which plans and rewrites), so that neither imports the other back.

Steps 4 and 5 of a cleaning (1-3, the plan, the offset map and the rewrite, are cleaner.py's):

4. Swap (event loop, ``PartitionLog.replace_segments``), in this order, each step for every group of the
   cleaning before the next (so the directory is fsynced three times per cleaning, not per group), so that
   ``kill -9`` at any point leaves a log the loader completes or rolls back without losing a record:

   a. the group's aborted-transaction entries are rewritten into ``{base}.txnindex`` (atomically; the
      loader drops an entry found twice);
   b. ``{base}.swap-end`` is in place (the cleaner thread wrote it; written here only if it went missing);
   c. ``{base}.log.cleaned`` is renamed to ``{base}.log.swap``; then the directory is fsynced — the commit
      point (a group whose rename reached the disk is completed by recovery, whatever became of the others:
      the groups cover disjoint segments);
   d. the group's other segments lose their files (.log first, newest first), and ``{base}``'s indexes;
   e. ``{base}.log.swap`` is renamed over ``{base}.log``; then the directory is fsynced and every
      ``{base}.swap-end`` removed;
   f. the indexes the cleaner thread built beside the cleaned log (``{base}.index.cleaned``,
      ``{base}.timeindex.cleaned``, fsynced) are renamed into place; then the directory is fsynced. (A crash
      before leaves the segment without indexes: the loader rebuilds them.)

   Recovery (loader.py, ``complete_swaps``): every ``*.cleaned`` file is deleted (the cleaning is lost,
   nothing else); for each ``{base}.log.swap`` the segments with a base in [base, swap-end) are deleted and
   the swap renamed to ``{base}.log`` (the indexes are rebuilt by the usual recovery); stray ``.swap-end``
   files are deleted. Replaced segments' fds stay open for ``file.delete.delay.ms`` (60 s) so fetches that
   already hold a region of them finish.
5. Checkpoint: the new first dirty offset (the map's end) and the cleaning's (end, time) pair are written to
   ``cleaner-offset-checkpoint`` by the log's flusher (a crash before it only means cleaning that range
   again); text, version 0::

       0\\n
       FIRST_DIRTY\\n
       SWEPT\\n          (the tombstone horizon the last cleaning applied)
       N\\n
       END TIME_MS\\n      (N lines: tombstones below END were first cleaned at TIME_MS or earlier)

   A tombstone at offset o is removed by the first cleaning at least ``delete.retention.ms`` after the
   cleaning that first cleaned it (Kafka's rule). Kafka 3.x keeps that time in the batch header (KIP-534's
   delete-horizon attribute bit), which clients such as librdkafka do not read, so odradek keeps it in
   this file instead; as with KIP-534, a log with nothing dirty is cleaned again once the horizon has
   moved past SWEPT, so tombstones go without new writes.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .files import fsync_dir, write_file_atomically
from .index import write_all
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, parse_segment_file_name

if TYPE_CHECKING:
    from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SWAP_END_SUFFIX = ".swap-end"


# -- checkpoint ---------------------------------------------------------------------------------------------

@dataclass
class CleanerCheckpoint:
    """``cleaner-offset-checkpoint`` of one partition (layout in the module docstring)."""

    first_dirty: int = 0
    history: list[tuple[int, int]] = field(default_factory=list)  # (end offset, cleaning time ms), ascending
    swept: int = 0  # the tombstone horizon the last cleaning applied

    @classmethod
    def read(cls, directory: Path) -> "CleanerCheckpoint":
        try:
            lines = (directory / CHECKPOINT_FILE).read_text("ascii").split("\n")
            if int(lines[0]) != 0:
                return cls()
            first_dirty, swept = int(lines[1]), int(lines[2])
            history = []
            for line in lines[4:4 + int(lines[3])]:
                end, when = line.split()
                history.append((int(end), int(when)))
            return cls(first_dirty, history, swept)
        except (OSError, ValueError, IndexError, UnicodeDecodeError):
            return cls()  # missing or unreadable: everything is dirty, no tombstone is old enough

    def write(self, directory: Path) -> None:
        lines = ["0", str(self.first_dirty), str(self.swept), str(len(self.history))]
        lines += [f"{end} {when}" for end, when in self.history]
        write_file_atomically(directory / CHECKPOINT_FILE, ("\n".join(lines) + "\n").encode("ascii"))

    def reset_to(self, directory: Path, offset: int) -> None:
        """After a truncation: the first dirty offset no further than ``offset`` (the new log end), since
        what follows was rewritten; tombstone history kept (it only ever delays their removal)."""
        if self.first_dirty > offset:
            self.first_dirty = offset
            self.write(directory)

    def copy(self) -> "CleanerCheckpoint":
        return CleanerCheckpoint(self.first_dirty, list(self.history), self.swept)

    def tombstone_horizon(self, now_ms: int, delete_retention_ms: int) -> int:
        """Tombstones below this offset were first cleaned at least ``delete_retention_ms`` ago."""
        horizon = 0
        for end, when in self.history:
            if now_ms - when >= delete_retention_ms:
                horizon = max(horizon, end)
        return horizon

    def record(self, first_dirty: int, end: int, now_ms: int, delete_retention_ms: int, swept: int = 0) -> None:
        """A cleaning at ``now_ms`` cleaned up to ``end``, removing tombstones below ``swept``; entries no
        longer needed are merged away."""
        self.first_dirty = first_dirty
        self.swept = max(self.swept, swept)
        old = [(e, w) for e, w in self.history if now_ms - w >= delete_retention_ms]
        young = [(e, w) for e, w in self.history if now_ms - w < delete_retention_ms]
        merged = [max(old)] if old else []  # only the largest expired end matters
        self.history = sorted(merged + young + [(end, now_ms)])


# -- what a cleaning produced ----------------------------------------------------------------------------

@dataclass
class SegmentSource:
    base: int
    end: int  # the next segment's base offset
    size: int
    fd: int  # the cleaner's own fd (closed by ``clean``)
    segment: object  # the LogSegment, compared by identity at the swap


@dataclass
class CleaningTask:
    directory: Path
    segments: list[SegmentSource]
    first_dirty: int
    cleanable_end: int
    aborted: list["AbortedTxn"]
    keep_whole: frozenset[int]  # last offsets of batches kept as they are (producer state's cached batches)
    tombstone_horizon: int
    max_segment_bytes: int
    index_interval: int
    generation: int  # PartitionLog.cleaning_generation when planned (truncations bump it)
    checkpoint: CleanerCheckpoint
    delete_retention_ms: int
    started_ms: int


@dataclass
class CleanedGroup:
    base: int
    end: int
    path: Path  # {base}.log.cleaned
    sources: list[SegmentSource]


@dataclass
class CleaningResult:
    task: CleaningTask
    groups: list[CleanedGroup]
    map_end: int  # the next first dirty offset
    bytes_read: int = 0
    bytes_written: int = 0


def cleaned_paths(group: CleanedGroup) -> list[Path]:
    """The files a cleaning wrote for a group: its .cleaned log, offset and time index, and its swap-end."""
    stem = f"{group.base:020d}"
    return [group.path] + [group.path.with_name(f"{stem}{suffix}{CLEANED_SUFFIX}")
                           for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)] + [swap_end_path(group)]


def swap_end_path(group: CleanedGroup) -> Path:
    return group.path.with_name(f"{group.base:020d}{SWAP_END_SUFFIX}")


def write_swap_end(directory: Path, group: CleanedGroup) -> None:
    """``{base}.swap-end``: the offset where the group ends, fsynced (the directory entry is the caller's)."""
    fd = os.open(swap_end_path(group), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        write_all(fd, f"{group.end}\n".encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)


def install_indexes(directory: Path, base: int) -> bool:
    """Swap, step f: the indexes built by the cleaner thread renamed into place (False: missing, the caller
    rebuilds them); the caller fsyncs the directory. A crash before leaves no index, which the loader
    rebuilds."""
    stem = f"{base:020d}"
    try:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            os.replace(directory / f"{stem}{suffix}{CLEANED_SUFFIX}", directory / f"{stem}{suffix}")
    except FileNotFoundError:
        return False
    return True


# -- recovery -------------------------------------------------------------------------------------------------

def complete_swaps(directory: Path) -> None:
    """Loader: delete ``*.cleaned`` files, complete every ``{base}.log.swap`` (module docstring, step 4),
    delete stray ``.swap-end`` files. Runs before the segments are listed."""
    names = os.listdir(directory)
    changed = False
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            log.info("%s: removing an unfinished cleaning %s", directory, name)
            (directory / name).unlink(missing_ok=True)
            changed = True
    bases = sorted(b for b in (parse_segment_file_name(n) for n in names) if b is not None)
    for name in names:
        if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        stem = name[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
        if len(stem) != 20 or not stem.isdigit():
            continue
        base = int(stem)
        end_file = directory / f"{stem}{SWAP_END_SUFFIX}"
        try:
            end = int(end_file.read_text("ascii").strip())
        except (OSError, ValueError):
            end = base + 1  # cannot happen (written before the swap file); replace only its own segment
        log.warning("%s: completing the swap of cleaned segment %d (up to %d)", directory, base, end)
        for other in sorted((b for b in bases if base < b < end), reverse=True):
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (directory / f"{other:020d}{suffix}").unlink(missing_ok=True)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (directory / f"{stem}{suffix}").unlink(missing_ok=True)
        os.replace(directory / name, directory / f"{stem}{LOG_SUFFIX}")
        changed = True
    if changed:
        fsync_dir(directory)
    for name in os.listdir(directory):
        if name.endswith(SWAP_END_SUFFIX):
            (directory / name).unlink(missing_ok=True)
            changed = True
    if changed:
        fsync_dir(directory)


def swap_in(directory: Path, group: CleanedGroup) -> None:
    """Steps b, c of the swap (module docstring): the caller's fsync of the directory that follows is the
    commit point. No fsync here unless the cleaner thread's swap-end file went missing."""
    stem = f"{group.base:020d}"
    if not swap_end_path(group).exists():
        write_file_atomically(directory / f"{stem}{SWAP_END_SUFFIX}", f"{group.end}\n".encode("ascii"))
    os.replace(group.path, directory / f"{stem}.log{SWAP_SUFFIX}")


def finish_swap(directory: Path, group: CleanedGroup) -> None:
    """Step e's rename: the swap file over ``{base}.log`` (the log's bytes were fsynced by the cleaner
    thread; a rename does not change them). The caller fsyncs the directory, then calls `remove_swap_end`."""
    stem = f"{group.base:020d}"
    os.replace(directory / f"{stem}.log{SWAP_SUFFIX}", directory / f"{stem}.log")


def remove_swap_end(group: CleanedGroup) -> None:
    """The end of step e, once the renames of `finish_swap` are on disk."""
    swap_end_path(group).unlink(missing_ok=True)
