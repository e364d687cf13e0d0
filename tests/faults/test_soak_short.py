"""The short soak of `make test`: one fault of each kind (kill -9 of a broker and of the controller, SIGSTOP
past the session timeout, a network partition where namespaces can be made, a ZooKeeper restart, a
controlled shutdown) against a three-broker cluster with every soak client running, checked for safety at
the end and for liveness after each heal (tests/faults/nemesis.py has the engine, the clients, and the
derivation of the liveness deadline). `make soak` runs the same engine for minutes of random faults.

It runs in the tests/faults rank of tests/conftest.py's xdist groups (one group per module, fault modules
first), so it starts early on a worker of its own.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from odradek.tools.zookeeper import zookeeper_unavailable
from tests.faults.nemesis import SoakConfig, run_soak

log = logging.getLogger(__name__)


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
