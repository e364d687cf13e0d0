"""The log cleaner (storage/cleaner.py) at the storage level: what a cleaning keeps, its checkpoint, and
recovery from a crash at each step of the swap."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from odradek.records.batch import iter_batches, validate_v2
from odradek.records.codec import ABORT, COMMIT, build_batch, build_control_batch, decode_batch
from odradek.storage import LogConfig, PartitionLog
from odradek.storage import cleaner as cleaner_module
from odradek.storage.cleaned_segments import CleanerCheckpoint, CleaningResult, finish_swap, swap_in
from odradek.storage.cleaner import CleanerAborted, Throttler, clean, plan_cleaning

NOW = 10_000_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path: Path, clock: Clock, **config) -> PartitionLog:
    config.setdefault("segment_bytes", 400)
    return PartitionLog.open(path, LogConfig(compact=True, delete=False, **config), clock=clock)


def put(plog: PartitionLog, *records: tuple[bytes | None, bytes | None], compression: int = 0, pid: int = -1,
        seq: int = -1, transactional: bool = False) -> None:
    buf = bytearray(build_batch([(k, v, [], NOW) for k, v in records], compression=compression, producer_id=pid,
                                producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                                transactional=transactional))
    plog.append(buf, validate_v2(buf))
    plog.update_high_watermark(plog.log_end_offset)


def marker(plog: PartitionLog, pid: int, commit: bool) -> None:
    buf = bytearray(build_control_batch(COMMIT if commit else ABORT, pid, 0, 0, NOW))
    plog.append_marker(buf, validate_v2(buf)[0][1], not commit, 0)
    plog.update_high_watermark(plog.log_end_offset)


def records(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record from the log start, across gaps and segments."""
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:  # bounded: every read moves past at least one batch
        data = plog.read(offset, 1 << 20)
        if not data:
            break
        batches = list(iter_batches(data))
        validate_v2(data, compacted=True)  # CRCs of rewritten batches hold
        for pos, header in batches:
            if not header.is_control:
                out += [(r.offset, r.key, r.value) for r in decode_batch(data, pos)[1] if r.offset >= offset]
            offset = header.last_offset + 1
    return out


def run_cleaning(plog: PartitionLog, clock: Clock, capacity: int = 1 << 20) -> CleaningResult:
    task = plan_cleaning(plog, clock(), force=True)
    assert task is not None
    return clean(task, capacity, Throttler(float("inf"), threading.Event()))


def clean_now(plog: PartitionLog, clock: Clock, capacity: int = 1 << 20) -> list:
    replaced = plog.replace_segments(run_cleaning(plog, clock, capacity), clock())
    assert replaced is not None
    for segment in replaced:
        segment.close()
    return replaced


def fill(plog: PartitionLog, rounds: int = 6, keys: int = 4) -> dict[bytes, bytes]:
    latest = {}
    for r in range(rounds):
        for k in range(keys):
            key, value = b"k%d" % k, b"v%d-%d" % (k, r)
            put(plog, (key, value))
            latest[key] = value
    return latest


def test_latest_value_per_key_survives_offsets_kept(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock)
    latest = fill(plog)
    before = records(plog)
    assert plog.segment_count > 2
    end = plog.log_end_offset
    clean_now(plog, clock)
    after = records(plog)
    assert plog.log_end_offset == end
    assert len(after) < len(before)
    assert {k: v for _, k, v in after} == latest
    assert set(after) <= set(before)  # offsets and values unchanged, only fewer
    cleaned_below = CleanerCheckpoint.read(plog.directory).first_dirty
    keys_below = [k for o, k, _ in after if o < cleaned_below]
    assert len(keys_below) == len(set(keys_below))  # one record per key in the cleaned part
    # reading from an offset inside a gap gives the next record
    gap = next(o for o in range(end) if o not in {o for o, _, _ in after})
    data = plog.read(gap, 1 << 20)
    assert data and next(iter_batches(data))[1].last_offset >= gap
    names = {p.name for p in plog.directory.iterdir()}
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".swap-end"))]
    for name in names:  # the thread's indexes were installed beside every segment
        if name.endswith(".log"):
            assert {name[:-4] + ".index", name[:-4] + ".timeindex"} <= names
    # a timestamp lookup and an offset lookup through the installed indexes
    assert plog.find_batch_by_timestamp(NOW) is not None
    plog.close()
    reopened = open_log(tmp_path / "t-0", clock)
    assert records(reopened) == after
    reopened.close()


def test_compressed_batch_is_rebatched_with_its_header(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=1 << 20)
    put(plog, (b"a", b"1"), (b"b", b"1"), (b"c", b"1"), compression=1)  # gzip, offsets 0-2
    put(plog, (b"b", b"2"), compression=1)
    plog._roll()
    put(plog, (b"z", b"active"))
    clean_now(plog, clock)
    data = plog.read(0, 1 << 20)
    (pos, header), *_ = list(iter_batches(data))
    assert (header.base_offset, header.last_offset, header.records_count, header.compression) == (0, 2, 2, 1)
    assert [(r.offset, r.key) for r in decode_batch(data, pos)[1]] == [(0, b"a"), (2, b"c")]
    assert [(o, k, v) for o, k, v in records(plog)] == [(0, b"a", b"1"), (2, b"c", b"1"), (3, b"b", b"2"),
                                                          (4, b"z", b"active")]
    plog.close()


def test_tombstones_go_only_after_delete_retention(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock, delete_retention_ms=60_000)
    fill(plog, rounds=2)
    put(plog, (b"k1", None))
    fill(plog, rounds=1, keys=0)
    for i in range(12):
        put(plog, (b"x%d" % i, b"filler"))
    clean_now(plog, clock)
    assert (b"k1", None) in [(k, v) for _, k, v in records(plog)]
    clock.now += 30_000
    clean_now(plog, clock)
    assert (b"k1", None) in [(k, v) for _, k, v in records(plog)]  # only 30 s after the first cleaning
    clock.now += 31_000
    clean_now(plog, clock)
    keys = [k for _, k, _ in records(plog)]
    assert b"k1" not in keys and b"k0" in keys
    plog.close()


def test_bounded_offset_map_cleans_in_steps(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock)
    latest = fill(plog, rounds=4, keys=6)
    for i in range(8):
        put(plog, (b"y", b"%d" % i))
    result = run_cleaning(plog, clock, capacity=3)
    assert result.map_end < result.task.cleanable_end
    assert plog.replace_segments(result, clock()) is not None
    latest[b"y"] = b"7"
    for _ in range(10):  # bounded: every step moves the first dirty offset
        if CleanerCheckpoint.read(plog.directory).first_dirty >= plog._bases[-1]:
            break
        clean_now(plog, clock, capacity=3)
    assert {k: v for _, k, v in records(plog)} == latest
    plog.close()


def test_aborted_data_removed_committed_kept_markers_kept(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=1 << 20)
    put(plog, (b"a", b"aborted"), pid=7, seq=0, transactional=True)
    put(plog, (b"b", b"aborted"), pid=7, seq=1, transactional=True)
    marker(plog, 7, commit=False)
    put(plog, (b"a", b"committed"), pid=7, seq=2, transactional=True)
    marker(plog, 7, commit=True)
    for i in range(6):  # the producer's cached batches (last 5) are kept whole: push the aborted ones out
        put(plog, (b"n%d" % i, b"x"), pid=7, seq=3 + i)
    plog._roll()
    put(plog, (b"z", b"active"))
    assert plog.aborted_transactions(0, plog.log_end_offset)
    clean_now(plog, clock)
    kept = [(k, v) for _, k, v in records(plog)]
    assert (b"a", b"aborted") not in kept and (b"b", b"aborted") not in kept
    assert (b"a", b"committed") in kept
    data = plog.read(0, 1 << 20)
    assert sum(1 for _, h in iter_batches(data) if h.is_control) == 2
    assert plog.aborted_transactions(0, plog.log_end_offset)  # the index entry stays with its marker
    plog.close()
    reopened = open_log(tmp_path / "t-0", clock)
    assert [(k, v) for _, k, v in records(reopened)] == kept
    assert reopened.aborted_transactions(0, reopened.log_end_offset)
    reopened.close()


@pytest.mark.parametrize("crash_at", ["cleaned", "swap-end", "committed", "renamed"])
def test_crash_during_the_swap_loses_nothing(tmp_path: Path, crash_at: str) -> None:
    clock = Clock()
    path = tmp_path / "t-0"
    plog = open_log(path, clock)
    latest = fill(plog)
    before = records(plog)
    result = run_cleaning(plog, clock)
    group = result.groups[0]
    if crash_at != "cleaned":
        stem = f"{group.base:020d}"
        if crash_at == "swap-end":
            (path / f"{stem}.swap-end").write_text(f"{group.end}\n")
        else:
            swap_in(path, group)
            if crash_at == "renamed":  # old segments partly deleted, swap renamed into place
                later = [s for s in group.sources[1:]]
                if later:
                    for suffix in (".log", ".index"):
                        (path / f"{later[-1].base:020d}{suffix}").unlink(missing_ok=True)
                finish_swap(path, group)
    # kill -9: nothing closed cleanly, the in-memory log is abandoned
    for segment in plog._segments:
        segment.close()
    reopened = PartitionLog.open(path, LogConfig(compact=True, delete=False, segment_bytes=400), clock=clock)
    after = records(reopened)
    assert {k: v for _, k, v in after} == latest
    assert set(after) <= set(before)
    if crash_at in ("cleaned", "swap-end"):
        assert after == before  # rolled back
    else:
        assert len(after) < len(before)  # completed
    assert not [p for p in path.iterdir() if p.name.endswith((".cleaned", ".swap", ".swap-end"))]
    reopened.close()


def test_a_truncation_meanwhile_drops_the_cleaning(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock)
    fill(plog)
    result = run_cleaning(plog, clock)
    plog.truncate_to(plog.log_end_offset - 2)
    assert plog.replace_segments(result, clock()) is None
    assert not [p for p in plog.directory.iterdir() if p.name.endswith(".cleaned")]
    plog.close()


def test_throttle_stops_when_the_cleaner_closes() -> None:
    stop = threading.Event()
    throttler = Throttler(10.0, stop)
    throttler.account(5)
    stop.set()
    with pytest.raises(CleanerAborted):
        throttler.account(1000)


def test_checkpoint_history_merges_old_entries(tmp_path: Path) -> None:
    checkpoint = CleanerCheckpoint()
    checkpoint.record(10, 10, 1000, 500)
    checkpoint.record(20, 20, 1200, 500)
    checkpoint.record(30, 30, 2000, 500)
    assert checkpoint.history == [(20, 1200), (30, 2000)]
    assert checkpoint.tombstone_horizon(2000, 500) == 20
    checkpoint.write(tmp_path)
    assert CleanerCheckpoint.read(tmp_path) == checkpoint
    os.remove(tmp_path / "cleaner-offset-checkpoint")
    assert CleanerCheckpoint.read(tmp_path).first_dirty == 0


@pytest.mark.parametrize("compression", [0, 1, 3])
def test_keyless_record_detection(compression: int) -> None:
    from odradek.records.codec import has_keyless_record

    keyed = bytearray(build_batch([(b"k", b"v", [], NOW), (b"k2", None, [("h", b"x")], NOW)], compression=compression))
    keyless = bytearray(build_batch([(b"k", b"v", [], NOW), (None, b"v", [], NOW)], compression=compression))
    assert not has_keyless_record(keyed, validate_v2(keyed))
    both = keyed + keyless
    assert has_keyless_record(both, validate_v2(both))


def test_rebatched_batches_pass_only_the_compacted_validation(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=1 << 20)
    put(plog, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"))
    plog._roll()
    put(plog, (b"z", b"active"))
    clean_now(plog, clock)
    data = plog.read(0, 1 << 20)
    with pytest.raises(Exception):
        validate_v2(data)  # a producer may not send such a batch
    assert [h.records_count for _, h in validate_v2(data, compacted=True)] == [2, 1]
    plog.close()


def test_dirty_ratio_min_and_max_compaction_lag(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock, min_cleanable_dirty_ratio=0.9)
    fill(plog)
    assert plan_cleaning(plog, clock()) is not None  # all dirty: ratio 1
    clean_now(plog, clock)
    fill(plog, rounds=1)
    ratio, overdue = cleaner_module.dirty_ratio(plog, clock())
    assert 0 < ratio < 0.9 and not overdue
    assert plan_cleaning(plog, clock()) is None
    plog.update_config(LogConfig(compact=True, delete=False, segment_bytes=400, min_cleanable_dirty_ratio=0.9,
                                 max_compaction_lag_ms=60_000))
    clock.now += 61_000  # the first dirty record is now older than max.compaction.lag.ms
    assert cleaner_module.dirty_ratio(plog, clock())[1]
    assert plan_cleaning(plog, clock()) is not None
    # min.compaction.lag.ms: segments with records younger than it are not cleanable
    plog.update_config(LogConfig(compact=True, delete=False, segment_bytes=400, min_compaction_lag_ms=3_600_000))
    assert plan_cleaning(plog, clock(), force=True) is None
    plog.close()


def test_log_cleaner_threads_clean_and_the_tick_swaps(tmp_path: Path) -> None:
    import time

    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock)
    latest = fill(plog)
    cleaner = cleaner_module.LogCleaner(cleaner_module.CleanerConfig(backoff_ms=0))
    logs = {("t", 0): plog}
    try:
        cleaner.tick(logs, clock())
        assert cleaner.busy()
        deadline = time.monotonic() + 20
        while cleaner.cleanings == 0 and time.monotonic() < deadline:  # bounded by the deadline
            time.sleep(0.01)
            cleaner.tick(logs, clock())
        assert cleaner.cleanings == 1
        assert {k: v for _, k, v in records(plog)} == latest
        cleaner.tick(logs, clock())
        assert not cleaner.busy()  # nothing dirty any more
        cleaner.excluded_topics = frozenset({"t"})
        fill(plog)
        cleaner.tick(logs, clock())
        assert not cleaner.busy()
    finally:
        cleaner.close()
        plog.close()


def test_closing_the_cleaner_mid_cleaning_leaves_no_files(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock)
    fill(plog, rounds=10)
    cleaner = cleaner_module.LogCleaner(cleaner_module.CleanerConfig(backoff_ms=0, io_max_bytes_per_second=500.0))
    cleaner.tick({("t", 0): plog}, clock())
    assert cleaner.busy()
    cleaner.close()  # the throttled thread stops at its next accounting
    assert not [p for p in plog.directory.iterdir() if p.name.endswith(".cleaned")]
    plog.close()


def test_truncation_moves_the_first_dirty_offset_back(tmp_path: Path) -> None:
    clock = Clock()
    plog = open_log(tmp_path / "t-0", clock)
    fill(plog)
    clean_now(plog, clock)
    first_dirty = CleanerCheckpoint.read(plog.directory).first_dirty
    assert first_dirty > 5
    plog.truncate_to(5)
    assert CleanerCheckpoint.read(plog.directory).first_dirty <= 5
    assert plog.cleaner_checkpoint is not None and plog.cleaner_checkpoint.first_dirty <= 5
    plog.close()


def test_crash_after_commit_point_replaces_a_group_whose_tail_was_emptied(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "t-0"
    plog = open_log(path, clock, segment_bytes=500)
    put(plog, (b"a", b"1"), (b"b", b"1"))  # segment 0: kept
    plog._roll()
    put(plog, (b"c", b"1"))  # segment 1: superseded by segment 2, so the group's output ends in segment 0
    plog._roll()
    put(plog, (b"c", b"2"), (b"d", b"x" * 300))  # segment 2: a group of its own (sizes)
    plog._roll()
    put(plog, (b"z", b"active"))
    result = run_cleaning(plog, clock)
    first = result.groups[0]
    assert [s.base for s in first.sources] == [0, 2] and first.end == 3
    swap_in(path, first)  # the commit point, then kill -9
    for segment in plog._segments:
        segment.close()
    reopened = open_log(path, clock, segment_bytes=500)
    assert reopened.segment_base_offsets[:2] == [0, 3]  # segment 2 (its records superseded) is gone
    assert [(o, k, v) for o, k, v in records(reopened)] == [
        (0, b"a", b"1"), (1, b"b", b"1"), (3, b"c", b"2"), (4, b"d", b"x" * 300), (5, b"z", b"active")]
    reopened.close()


def test_reconfigured_thread_count_and_rate_apply_at_the_next_scan(tmp_path: Path) -> None:
    """log.cleaner.threads and .io.max.bytes.per.second changed at run time (a dynamic broker config): a second
    thread takes a second log at the next tick while the first cleaning goes on; both are swapped in."""
    import time

    clock = Clock()
    logs = {("t", p): open_log(tmp_path / f"t-{p}", clock) for p in range(2)}
    latest = {key: fill(plog, rounds=10) for key, plog in logs.items()}
    slow = cleaner_module.CleanerConfig(backoff_ms=0, io_max_bytes_per_second=500.0)
    cleaner = cleaner_module.LogCleaner(slow)
    try:
        cleaner.tick(logs, clock())
        assert len(cleaner._running) == 1  # one thread: one log at a time
        cleaner.reconfigure(cleaner_module.CleanerConfig(backoff_ms=0, io_max_bytes_per_second=500.0, threads=2))
        cleaner.tick(logs, clock())
        assert len(cleaner._running) == 2
        cleaner.reconfigure(cleaner_module.CleanerConfig(backoff_ms=0, threads=2))  # the rate lifted
        deadline = time.monotonic() + 30
        while cleaner.cleanings < 2 and time.monotonic() < deadline:  # bounded by the deadline
            time.sleep(0.01)
            cleaner.tick(logs, clock())
        assert cleaner.cleanings == 2
        for key, plog in logs.items():
            assert {k: v for _, k, v in records(plog)} == latest[key]
    finally:
        cleaner.close()
        for plog in logs.values():
            plog.close()
