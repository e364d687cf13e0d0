"""Keep glibc's malloc from handing large request buffers back to the kernel after every request.

A produce request is one buffer of up to a few MB, allocated when its frame arrives and freed when it has
been appended. By default glibc maps every block over its mmap threshold afresh and trims the heap top
whenever enough of it is free, so each such request paid page faults (kernel zeroing) for its buffers
twice over: a 1 KiB-record produce ran at 308k msgs/s against 461k with the heap kept (bench, 4 rounds).
Raising both thresholds keeps freed blocks in the process for the next request. Memory stays bounded:
at most the largest burst of in-flight buffers is kept, and blocks over 32 MiB are still mapped and
unmapped individually.

The other side of keeping freed blocks: when connections close holding large buffers (a burst of clients
that announced large requests, hostile or not), that memory would stay in the process for good, the heap
being fragmented by what is still live. `FreedMemory` counts the bytes such closes drop and, at most once a
TRIM_INTERVAL_S (the server's maintenance tick asks), calls malloc_trim(0) once TRIM_AFTER_FREED bytes
have been dropped since the last trim: glibc then hands every free page back to the kernel, from the middle
of the heap too, and RSS goes back towards where it was. Requests served and freed in the ordinary way are
not counted, so steady traffic keeps its buffers.

Other C libraries (musl, macOS) are left as they are.
"""

from __future__ import annotations

import ctypes
import logging
import time

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's upper limit for this setting on 64-bit
TRIM_THRESHOLD = 64 << 20
TRIM_AFTER_FREED = 16 << 20  # bytes dropped by closed connections before a malloc_trim is worth its walk
TRIM_INTERVAL_S = 1.0


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols: no library search (find_library forks ldconfig)
        libc.gnu_get_libc_version  # noqa: B018  (present on glibc only)
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_memory() -> bool:
    """Apply the thresholds when the process runs on glibc; True if they were taken."""
    libc = _glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not ok:
        log.debug("mallopt refused the thresholds; allocator left as it is")
    return ok


class FreedMemory:
    """Bytes of buffers dropped by closed connections, given back to the kernel with malloc_trim(0) once
    enough have been dropped (see the module docstring). A no-op off glibc.

    Not thread-safe; owned by the event loop.
    """

    def __init__(self, trim_after: int = TRIM_AFTER_FREED, interval_s: float = TRIM_INTERVAL_S) -> None:
        self.trim_after = trim_after
        self.interval_s = interval_s
        self.freed = 0  # since the last trim
        self.trims = 0
        self._last_trim = float("-inf")
        libc = _glibc()
        self._malloc_trim = getattr(libc, "malloc_trim", None) if libc is not None else None
        if self._malloc_trim is not None:
            self._malloc_trim.argtypes = [ctypes.c_size_t]

    def dropped(self, nbytes: int) -> None:
        self.freed += nbytes

    def trim_if_due(self) -> bool:
        """malloc_trim(0) if enough was dropped and the last trim is at least interval_s old; True if it ran."""
        if self.freed < self.trim_after or self._malloc_trim is None:
            return False
        now = time.monotonic()
        if now - self._last_trim < self.interval_s:
            return False
        self._last_trim = now
        self.freed = 0
        self.trims += 1
        self._malloc_trim(0)
        return True
