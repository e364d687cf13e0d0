"""What a write into the page cache costs on this machine, with and without dropping what lies behind it.

    .venv/bin/python bench/page_cache.py [--gb 6] [--drop-behind-mb 32] [--dir DIR]

One process writes `--gb` GiB in 800 KiB chunks (the size of a large produce request) to 1 GiB files in a
temporary directory, as a broker appends to segments, twice: leaving the page cache to the kernel, then
dropping everything further than `--drop-behind-mb` behind the write position (posix_fadvise DONTNEED, as
odradek does with log.page.cache.drop.behind.bytes). It prints the process's CPU seconds after each GiB. On
a VM whose host takes back the guest's free memory, the first touch of a page the guest has not used lately
faults into the host, and the plain run's later GiBs cost many times its first; the drop-behind run keeps
reusing the same pages. The files are removed after each run.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

CHUNK = 800 * 1024
FILE_BYTES = 1 << 30


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write(directory: str, total: int, drop_behind: int) -> tuple[list[float], float]:
    """CPU seconds after each GiB written, and the wall time; drop_behind 0 leaves the page cache alone."""
    chunk = b"x" * CHUNK
    start_cpu, start_wall = cpu_seconds(), time.monotonic()
    marks, written, fd, position, dropped_to, n = [], 0, -1, 0, 0, 0
    try:
        while written < total:
            if fd < 0 or position >= FILE_BYTES:
                if fd >= 0:
                    os.close(fd)
                fd = os.open(os.path.join(directory, f"{n:020d}.log"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
                n, position, dropped_to = n + 1, 0, 0
            os.write(fd, chunk)
            position += CHUNK
            written += CHUNK
            end = position - drop_behind
            if drop_behind and end - dropped_to >= drop_behind // 2:
                os.posix_fadvise(fd, 0, end, os.POSIX_FADV_DONTNEED)
                dropped_to = end
            if written // (1 << 30) > len(marks):
                marks.append(round(cpu_seconds() - start_cpu, 2))
    finally:
        if fd >= 0:
            os.close(fd)
    return marks, round(time.monotonic() - start_wall, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=int, default=6, help="GiB written per run")
    parser.add_argument("--drop-behind-mb", type=int, default=32)
    parser.add_argument("--dir", default=None, help="where the files go (default: a temporary directory)")
    args = parser.parse_args()
    for label, drop in (("page cache left to the kernel", 0),
                        (f"drop-behind {args.drop_behind_mb} MiB", args.drop_behind_mb << 20)):
        with tempfile.TemporaryDirectory(dir=args.dir) as directory:
            marks, wall = write(directory, args.gb << 30, drop)
        per_gb = [round(b - a, 2) for a, b in zip([0.0] + marks, marks)]
        print(f"{label}: CPU s per GiB {per_gb}, total {marks[-1]:.2f} s CPU, {wall:.2f} s wall")
        time.sleep(5)  # let the freed memory settle before the next run
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
