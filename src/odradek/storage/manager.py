"""LogManager: every partition log under one data directory."""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path
from typing import Callable

from .cleaner import CleanerConfig, LogCleaner
from .config import LogConfig
from .flusher import LogFlusher
from .files import fsync_dir, write_file_atomically
from .log import DELETED_SUFFIX, Clock, PartitionLog, rename_for_deletion, wall_clock_ms
from .producer_state import DEFAULT_EXPIRATION_MS

log = logging.getLogger(__name__)

_TOPIC_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")


def is_valid_topic_name(topic: str) -> bool:
    return topic not in (".", "..") and _TOPIC_RE.fullmatch(topic) is not None


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a ``{topic}-{partition}`` directory name, else None (split at the LAST '-')."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not partition.isascii() or not partition.isdigit() or not is_valid_topic_name(topic):
        return None
    return topic, int(partition)


class LogManager:
    """Owns every PartitionLog under ``data_dir``: loading at startup, creation, topic deletion, periodic
    retention and time-based flush, and the clean-shutdown marker.

    Files it writes directly in ``data_dir``:

    * ``.kafka_cleanshutdown`` -- empty file, written (atomically) by ``close`` after every log has been
      sealed and synced. Its presence at startup lets the logs skip the full scan of their last segment. It is
      removed as soon as a manager is constructed, so a crash at any later point is detected as unclean.
    * ``.topic-deletion-{topic}`` -- empty file, present while ``delete_topic`` moves the topic's partition
      directories aside. A crash mid-delete is finished at the next startup, so no half topic comes back.
    * ``{topic}-{partition}.{hex}.deleted/`` -- a partition directory on its way out; removed at startup.

    Directories whose names are not ``{topic}-{partition}`` (e.g. ``__cluster_metadata/``) are left alone.

    ``producer_id_expiration_ms`` (broker property producer.id.expiration.ms) is applied by ``tick`` at most
    every ``PRODUCER_EXPIRATION_CHECK_MS`` (Kafka's producer.id.expiration.check.interval.ms default).

    Every log it opens shares one ``LogFlusher`` thread for its fsyncs (flusher.py); ``close`` stops it.

    Concurrency: not thread-safe; owned by the event loop.
    """

    CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
    PRODUCER_EXPIRATION_CHECK_MS = 600_000
    DELETION_INTENT_PREFIX = ".topic-deletion-"

    def __init__(self, data_dir: Path, default_config: LogConfig, *, clock: Clock | None = None,
                 cleaner_config: CleanerConfig | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.default_config = default_config
        self._clock = clock or wall_clock_ms
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._closed = False
        self.flusher = LogFlusher()
        # compaction of logs with cleanup.policy=compact (cleaner.py): threads of its own, swaps in ``tick``
        self.cleaner = LogCleaner(cleaner_config or CleanerConfig())
        self.producer_id_expiration_ms = DEFAULT_EXPIRATION_MS
        self.drop_behind_bytes = 0  # log.page.cache.drop.behind.bytes, for every log (PartitionLog)
        self._next_producer_expiry_ms = self._clock() + self.PRODUCER_EXPIRATION_CHECK_MS
        marker = self.data_dir / self.CLEAN_SHUTDOWN_FILE
        marker.with_name(marker.name + ".tmp").unlink(missing_ok=True)
        self.clean_shutdown = marker.exists()
        if self.clean_shutdown:
            marker.unlink()
            fsync_dir(self.data_dir)

    # -- loading ----------------------------------------------------------------------------------------

    def load_all(self, config_for: Callable[[str], LogConfig] | None = None) -> dict[tuple[str, int], PartitionLog]:
        """Open (and recover) every partition directory; ``config_for(topic)`` supplies per-topic configs."""
        self._finish_interrupted_deletions()
        for name in sorted(os.listdir(self.data_dir)):
            key = parse_partition_dir(name)
            path = self.data_dir / name
            if key is None or key in self._logs or not path.is_dir() or path.is_symlink():
                continue
            config = config_for(key[0]) if config_for is not None else self.default_config
            self._logs[key] = PartitionLog.open(path, config, clean_shutdown=self.clean_shutdown, clock=self._clock,
                                                flusher=self.flusher, drop_behind_bytes=self.drop_behind_bytes)
        return dict(self._logs)

    def _finish_interrupted_deletions(self) -> None:
        for name in os.listdir(self.data_dir):
            path = self.data_dir / name
            if name.startswith(self.DELETION_INTENT_PREFIX):
                if name.endswith(".tmp"):
                    path.unlink(missing_ok=True)
                    continue
                topic = name[len(self.DELETION_INTENT_PREFIX):]
                log.warning("finishing the interrupted deletion of topic %r", topic)
                for directory in self._partition_dirs(topic):
                    rename_for_deletion(directory)
                path.unlink(missing_ok=True)
                fsync_dir(self.data_dir)
        for name in os.listdir(self.data_dir):
            if name.endswith(DELETED_SUFFIX) and (self.data_dir / name).is_dir():
                shutil.rmtree(self.data_dir / name, ignore_errors=True)

    def _partition_dirs(self, topic: str) -> list[Path]:
        out = []
        for name in os.listdir(self.data_dir):
            key = parse_partition_dir(name)
            if key is not None and key[0] == topic and (self.data_dir / name).is_dir():
                out.append(self.data_dir / name)
        return out

    # -- access -----------------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """Create the partition's log (or open it if its directory exists); returns the existing one if loaded."""
        if self._closed:
            raise RuntimeError("log manager is closed")
        if not is_valid_topic_name(topic) or partition < 0:
            raise ValueError(f"invalid topic partition {topic!r}-{partition}")
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        path = self.data_dir / f"{topic}-{partition}"
        is_new = not path.exists()
        plog = PartitionLog.open(path, config or self.default_config, clean_shutdown=False, clock=self._clock,
                                 flusher=self.flusher, drop_behind_bytes=self.drop_behind_bytes)
        if is_new:
            fsync_dir(self.data_dir)
        self._logs[key] = plog
        return plog

    def delete_topic(self, topic: str) -> None:
        """Close and remove every partition directory of ``topic`` (loaded or not)."""
        keys = [key for key in self._logs if key[0] == topic]
        for key in keys:
            self._logs.pop(key).close(flush=False)
        directories = self._partition_dirs(topic)
        if not directories:
            return
        intent = self.data_dir / f"{self.DELETION_INTENT_PREFIX}{topic}"
        write_file_atomically(intent, b"")
        doomed = [rename_for_deletion(directory) for directory in directories]
        intent.unlink()
        fsync_dir(self.data_dir)
        for directory in doomed:
            shutil.rmtree(directory, ignore_errors=True)

    def delete_partition(self, topic: str, partition: int) -> None:
        """Close and remove one partition's directory (a replica the cluster moved or deleted). A crash
        midway leaves a ``*.deleted`` directory, which the next start removes."""
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.delete()
            return
        directory = self.data_dir / f"{topic}-{partition}"
        if directory.is_dir():
            shutil.rmtree(rename_for_deletion(directory), ignore_errors=True)

    # -- periodic work and shutdown ---------------------------------------------------------------------

    def tick(self, now_ms: int, *, retention: bool = True) -> None:
        """Time-based flush, (when ``retention``) retention and producer id expiration for every log; one
        failing log does not stop the others."""
        expire = now_ms >= self._next_producer_expiry_ms
        if expire:
            self._next_producer_expiry_ms = now_ms + min(self.PRODUCER_EXPIRATION_CHECK_MS,
                                                         self.producer_id_expiration_ms)
        for key, plog in list(self._logs.items()):
            try:
                if retention:
                    plog.enforce_retention(now_ms)
                plog.maybe_flush(now_ms)
                if expire:
                    plog.remove_expired_producers(now_ms, self.producer_id_expiration_ms)
            except Exception:
                log.exception("periodic maintenance failed for %s-%d", *key)
        try:
            self.cleaner.tick(self._logs, now_ms)
        except Exception:
            log.exception("log cleaner tick failed")

    def close(self) -> None:
        """Seal and close every log, then write the clean-shutdown marker (only if all closed cleanly)."""
        if self._closed:
            return
        self._closed = True
        self.cleaner.close()
        ok = True
        for key, plog in self._logs.items():
            try:
                plog.close()
            except Exception:
                ok = False
                log.exception("closing %s-%d failed", *key)
        self._logs.clear()
        self.flusher.close()
        if ok:
            write_file_atomically(self.data_dir / self.CLEAN_SHUTDOWN_FILE, b"")
