"""The malloc thresholds `odradek serve` sets so large request buffers are reused, not remapped."""

import platform

import pytest

from odradek.net.allocator import keep_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the thresholds exist on glibc only")
def test_glibc_takes_the_thresholds():
    assert keep_freed_memory() is True
