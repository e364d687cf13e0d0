"""LogManager (loading, creation, topic deletion, clean shutdown) and recovery after a real kill -9."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from crc32c import crc32c

from odradek.records.batch import iter_batches, validate_v2
from odradek.storage import LogConfig, LogManager, PartitionLog
from odradek.storage.manager import parse_partition_dir


def make_batch(count: int = 1, timestamp: int = 1000, payload: bytes = b"m" * 20) -> bytes:
    after_crc = struct.pack(">hiqqqhii", 0, count - 1, timestamp, timestamp, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c(after_crc)) + after_crc


def append(plog: PartitionLog, *batches: bytes):
    """Append as a single node does: the high watermark follows the log end."""
    buf = bytearray(b"".join(batches))
    result = plog.append(buf, validate_v2(buf))
    plog.update_high_watermark(plog.log_end_offset)
    return result


def test_parse_partition_dir() -> None:
    assert parse_partition_dir("orders-0") == ("orders", 0)
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("a.b_c-1-7") == ("a.b_c-1", 7)
    for name in ("__cluster_metadata", "orders", "orders-", "-3", "orders-x", "t-0.abc.deleted", "t-+1", "t/x-1"):
        assert parse_partition_dir(name) is None, name


def test_create_load_all_and_clean_shutdown(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig())
    assert not manager.clean_shutdown
    for topic, partition in [("my-topic-1", 0), ("my-topic-1", 1), ("my-topic", 0), ("a.b_c", 3)]:
        plog = manager.create(topic, partition)
        append(plog, make_batch(partition + 1))
    assert manager.create("my-topic", 0) is manager.get("my-topic", 0)
    (tmp_path / "__cluster_metadata").mkdir()
    (tmp_path / "__cluster_metadata" / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "meta.properties").write_text("node.id=1\n")
    manager.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()

    manager = LogManager(tmp_path, LogConfig())
    assert manager.clean_shutdown
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # a crash from here on is detected
    logs = manager.load_all()
    assert sorted(logs) == [("a.b_c", 3), ("my-topic", 0), ("my-topic-1", 0), ("my-topic-1", 1)]
    assert manager.get("my-topic-1", 1).log_end_offset == 2
    assert manager.get("a.b_c", 3).log_end_offset == 4
    assert manager.get("nope", 0) is None
    assert (tmp_path / "__cluster_metadata" / "00000000000000000000.log").read_bytes() == b"x"
    manager.close()


def test_unclean_start_recovers_every_log(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig())
    first = manager.create("t", 0)
    append(first, make_batch(3))
    # The process dies once its writes are on disk: no close, so the marker is never written. Waiting for the
    # flusher first keeps its jobs (the leader epoch checkpoint) from racing the second manager's.
    first.flush()
    log_file = tmp_path / "t-0" / "00000000000000000000.log"
    with open(log_file, "ab") as f:
        f.write(make_batch(1)[:25])
    manager2 = LogManager(tmp_path, LogConfig())
    assert not manager2.clean_shutdown
    plog = manager2.load_all()[("t", 0)]
    assert plog.log_end_offset == 3
    assert log_file.stat().st_size == len(make_batch(3))
    manager2.close()


def test_invalid_names_are_refused(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig())
    for topic in ("", "a/b", "..", "x" * 250, "sp ace"):
        with pytest.raises(ValueError):
            manager.create(topic, 0)
    with pytest.raises(ValueError):
        manager.create("ok", -1)
    manager.close()


def test_per_topic_config(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig())
    manager.create("small", 0, LogConfig(segment_bytes=100))
    manager.close()
    manager = LogManager(tmp_path, LogConfig())
    logs = manager.load_all(lambda topic: LogConfig(segment_bytes=100) if topic == "small" else manager.default_config)
    assert logs[("small", 0)].config.segment_bytes == 100
    manager.close()


def test_delete_topic_removes_only_that_topic(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig())
    for topic in ("events", "events-1"):
        for partition in range(3):
            append(manager.create(topic, partition), make_batch(1))
    manager.delete_topic("events")
    assert manager.get("events", 0) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events-1-0", "events-1-1", "events-1-2"]
    assert manager.get("events-1", 2).log_end_offset == 1
    manager.delete_topic("never-existed")
    fresh = manager.create("events", 0)
    assert fresh.log_end_offset == 0
    manager.close()


def test_interrupted_topic_deletion_is_finished_at_startup(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig())
    for partition in range(3):
        append(manager.create("doomed", partition), make_batch(1))
    append(manager.create("kept", 0), make_batch(1))
    manager.close()
    # a crash after the intent was written and one partition had been moved aside
    (tmp_path / ".topic-deletion-doomed").write_bytes(b"")
    os.rename(tmp_path / "doomed-1", tmp_path / "doomed-1.0123abcd.deleted")
    manager = LogManager(tmp_path, LogConfig())
    logs = manager.load_all()
    assert sorted(logs) == [("kept", 0)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept-0"]
    manager.close()


def test_tick_applies_retention_and_time_flush(tmp_path: Path) -> None:
    batch = make_batch(1, timestamp=1000, payload=b"t" * 100)
    manager = LogManager(tmp_path, LogConfig(segment_bytes=len(batch), retention_ms=60_000, flush_ms=10))
    plog = manager.create("t", 0)
    for _ in range(4):
        append(plog, batch)
    assert plog.segment_count == 4
    manager.tick(1000 + 30_000)
    assert plog.segment_count == 4
    manager.tick(1000 + 60_001)
    assert plog.segment_count == 1 and plog.log_start_offset == 3
    manager.close()


CHILD = textwrap.dedent(
    """
    import struct, sys
    from pathlib import Path
    from crc32c import crc32c
    from odradek.records.batch import validate_v2
    from odradek.storage import LogConfig, LogManager

    def make_batch(count, i):
        payload = (b"%08d" % i) * 20
        after = struct.pack(">hiqqqhii", 0, count - 1, 1000 + i, 1000 + i, -1, -1, -1, count) + payload
        return struct.pack(">qiibI", 0, 9 + len(after), 0, 2, crc32c(after)) + after

    manager = LogManager(Path(sys.argv[1]), LogConfig(segment_bytes=20_000, index_interval_bytes=512))
    logs = manager.load_all()
    plog = manager.create("crash-test", 0)
    i = 0
    while True:
        buf = bytearray(b"".join(make_batch(1 + (i + k) % 4, i + k) for k in range(1 + i % 3)))
        result = plog.append(buf, validate_v2(buf))
        i += 1
        print(result.last_offset + 1, flush=True)
    """
)


@pytest.mark.parametrize("round_", range(3))
def test_kill_9_mid_load_loses_nothing_acknowledged(tmp_path: Path, round_: int) -> None:
    acknowledged = 0
    for attempt in range(3):  # crash, restart, crash again on top of the recovered log
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        last = None
        seen = 0
        deadline = None
        while True:  # let it run for a while after its first append, whatever the machine's speed
            line = child.stdout.readline()
            if not line:
                break
            last = int(line)
            seen += 1
            deadline = deadline or time.monotonic() + 0.2 + 0.1 * round_
            if time.monotonic() >= deadline and seen >= 200:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert last is not None and last > acknowledged
        acknowledged = last
        manager = LogManager(tmp_path, LogConfig(segment_bytes=20_000, index_interval_bytes=512))
        plog = manager.load_all()[("crash-test", 0)]
        assert plog.log_end_offset >= acknowledged
        data = plog.read(0, 1 << 30)
        validate_v2(data)
        expected = 0
        for _, header in iter_batches(data):
            assert header.base_offset == expected
            expected = header.last_offset + 1
        assert expected == plog.log_end_offset
        for offset in range(0, plog.log_end_offset, 7):
            assert next(iter_batches(plog.read(offset, 1)))[1].last_offset >= offset
        acknowledged = plog.log_end_offset
        if attempt == 1:
            manager.close()
        else:
            for segment in plog._segments:  # leave without a clean shutdown
                segment.close()
