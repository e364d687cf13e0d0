"""Test-only launcher: an odradek broker that places coordinator keys as odradek did before issue 37
(`hash & 0x7FFFFFFF`) and writes no placement record, to produce a data directory in the old layout for the
upgrade test (test_coordinator_placement.py).

BrokerProcess runs it as its command prefix: `<python> legacy_placement_broker.py <python> -m odradek serve …`.
The placement functions are changed in place (their code objects), so every module that imported them by name
sees the old rule, whatever the import order.
"""

import sys

from odradek.coordinator import placement


def _never_moved(partitions: int) -> bool:
    return False


placement.partition_for.__code__ = placement.legacy_partition_for.__code__
placement.may_have_moved.__code__ = _never_moved.__code__

if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[1:3] != ["-m", "odradek"]:
        raise SystemExit(f"expected '<python> -m odradek …' after the launcher, got {argv[:3]}")
    from odradek.cli import main

    sys.argv = ["odradek", *argv[3:]]
    raise SystemExit(main())
