"""The malloc thresholds `odradek serve` sets so large request buffers are reused, not remapped."""

import platform

import pytest

from odradek.net.allocator import FreedMemory, keep_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the thresholds exist on glibc only")
def test_glibc_takes_the_thresholds():
    assert keep_freed_memory() is True


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim exists on glibc only")
def test_memory_dropped_by_closed_connections_is_trimmed_once_enough_and_not_too_often():
    freed = FreedMemory(trim_after=1000, interval_s=3600.0)
    freed.dropped(999)
    assert not freed.trim_if_due()  # not enough yet
    freed.dropped(1)
    assert freed.trim_if_due() and freed.freed == 0 and freed.trims == 1
    freed.dropped(5000)
    assert not freed.trim_if_due()  # within the interval
