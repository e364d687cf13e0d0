"""The log cleaner's swap on the event loop: how long `PartitionLog.replace_segments` takes and how many
fsyncs it makes, for a cleaning of many small groups.

    .venv/bin/python bench/cleaner_swap.py [--rounds 15]
    PYTHONPATH=<other checkout>/src .venv/bin/python bench/cleaner_swap.py     # the same for other code

Each round fills a compacted log of 2,000-byte segments with 480 keyed records (8 keys) in a temporary
directory under /var/tmp (a disk, not tmpfs), runs a cleaning on this thread (`clean`, as the cleaner thread
does), then times `replace_segments` with os.fsync counted. Prints the median and max over the rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from odradek.storage.cleaner import Throttler, clean, plan_cleaning
from odradek.storage.config import LogConfig
from odradek.storage.log import PartitionLog
from odradek.records.batch import validate_v2
from odradek.records.codec import build_batch


def one_round(root: Path) -> tuple[int, int, float]:
    now = int(time.time() * 1000)
    plog = PartitionLog.open(root / "t-0", LogConfig(compact=True, delete=False, segment_bytes=2000),
                             clock=lambda: now)
    for r in range(60):
        for k in range(8):
            buf = bytearray(build_batch([(b"k%d" % k, b"v%d-%d" % (k, r), [], now)]))
            plog.append(buf, validate_v2(buf))
    plog.update_high_watermark(plog.log_end_offset)
    task = plan_cleaning(plog, now, force=True)
    result = clean(task, 1 << 20, Throttler(float("inf"), threading.Event()))
    fsyncs = 0
    real = os.fsync

    def counting(fd: int) -> None:
        nonlocal fsyncs
        fsyncs += 1
        real(fd)

    os.fsync = counting
    try:
        started = time.perf_counter()
        replaced = plog.replace_segments(result, now)
        elapsed = time.perf_counter() - started
    finally:
        os.fsync = real
    for segment in replaced or []:
        segment.close()
    plog.close()
    return len(result.groups), fsyncs, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    times, counts, groups = [], [], 0
    for _ in range(args.rounds):
        root = Path(tempfile.mkdtemp(prefix="odradek-swap-", dir="/var/tmp"))
        try:
            groups, fsyncs, elapsed = one_round(root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        times.append(elapsed * 1000)
        counts.append(fsyncs)
    import odradek
    print(f"odradek from {os.path.dirname(odradek.__file__)}: {groups} groups per cleaning, "
          f"{statistics.median(counts):.0f} fsyncs in the swap, swap {statistics.median(times):.1f} ms median, "
          f"{max(times):.1f} ms max over {args.rounds} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
