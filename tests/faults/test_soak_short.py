"""The short soak of `make test`: one fault of each kind (kill -9 of a broker and of the controller, SIGSTOP
past the session timeout, a network partition where namespaces can be made, a ZooKeeper restart, a
controlled shutdown) against a three-broker cluster with every soak client running, checked for safety at
the end and for liveness after each heal (tests/faults/nemesis.py has the engine, the clients, and the
derivation of the liveness deadline). `make soak` runs the same engine for minutes of random faults.

Part of `make test`: a module of its own is an xdist group of its own (tests/conftest.py), so it holds one
worker for its ~4 minutes while the other worker runs the rest; `make soak-short` runs it alone. The
transactional loop's once-open stall after a SIGSTOP of its coordinator was librdkafka's
send_offsets_to_transaction blocking for good (tests/faults/soak_workloads.py, TransformLoop; docs/cluster.md).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from odradek.tools.zookeeper import zookeeper_unavailable
from tests.faults.nemesis import SoakConfig, run_soak
from tests.faults.soak_workloads import skipped_offsets, transform_anomalies

log = logging.getLogger(__name__)


@pytest.mark.soak
@pytest.mark.timeout(600)  # six faults, each up to the 50 s liveness deadline plus healing, on a loaded machine
def test_one_fault_of_each_kind(tmp_path: Path) -> None:
    reason = zookeeper_unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"ZooKeeper must be available in CI: {reason}")
        pytest.skip(reason)
    seed = int(os.environ.get("SOAK_SEED", "37"))
    result = run_soak(SoakConfig(one_each=True, seed=seed), tmp_path, log=log.warning)
    log.warning("soak: %s; figures by kind: %s", result, result.by_kind())
    assert result.faults, str(result)
    assert result.ok, str(result)


# -- the soak's own checks find what they are for (no cluster needed) -----------------------------------------

SOURCE = {0: [(0, b"p-0"), (1, b"p-3")], 1: [(0, b"p-1")]}


def test_transform_check_passes_exactly_once_and_names_each_anomaly() -> None:
    committed = {0: 2, 1: 1}
    clean = {0: [(0, b"p-0@1"), (2, b"p-3@3")], 1: [(0, b"p-1@1")]}  # offset 1: a commit marker
    assert transform_anomalies(SOURCE, clean, committed, aborted_txns={2}) == []
    twice = {0: [(0, b"p-0@1"), (2, b"p-0@3"), (4, b"p-3@3")], 1: [(0, b"p-1@1")]}
    assert any("has 2 committed outputs" in p for p in transform_anomalies(SOURCE, twice, committed, {2}))
    missing = {0: [(0, b"p-0@1")], 1: [(0, b"p-1@1")]}
    assert any("has 0 committed outputs" in p for p in transform_anomalies(SOURCE, missing, committed, {2}))
    aborted = {0: [(0, b"p-0@2"), (2, b"p-3@3")], 1: [(0, b"p-1@1")]}
    assert any("aborted output visible" in p for p in transform_anomalies(SOURCE, aborted, committed, {2}))
    reordered = {0: [(0, b"p-3@1"), (2, b"p-0@3")], 1: [(0, b"p-1@1")]}
    assert any("out of input order" in p for p in transform_anomalies(SOURCE, reordered, committed, {2}))
    early = {0: [(0, b"p-0@1"), (2, b"p-3@3")], 1: [(0, b"p-1@1")]}
    assert any("past the committed offset" in p for p in transform_anomalies(SOURCE, early, {0: 1, 1: 1}, set()))


def test_group_check_names_a_committed_offset_past_unread_records() -> None:
    read = {0: [(0, b"p-0"), (1, b"p-3"), (2, b"p-6")]}
    assert skipped_offsets(read, {0: {0, 1}}, [{0: 1}, {0: 2}]) == []
    found = skipped_offsets(read, {0: {0, 2}}, [{0: 1}, {0: 3}])
    assert found and "offsets [1]" in found[0]
