"""Fixtures of the Kafka 0.7 tests: a broker with KAFKA07 listeners, and the npm 0.7 clients.

The broker (`broker07`) serves PLAINTEXT for current clients, KAFKA07 (0.7 messages, magic 1) and KAFKA06
(a KAFKA07 listener with `legacy.message.magic=0`, for node-kafka, which reads only 0.6-format messages).

The npm clients (`node07`): prozess@0.7.0 and kafka@0.2.3 (node-kafka), installed into
~/.cache/odradek/node07 (outside the repository) on first use, with `--ignore-scripts`: prozess depends on
`bignum`, a native addon that no longer builds on Node 20, which js/bignum_shim.js replaces. Without Node.js or
the npm registry the tests that use them skip with the reason; under CI (`CI` set) they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.cluster import conftest as cluster_fixtures
from tests.conftest import BrokerProcess, free_port

# ZooKeeper and cluster fixtures for test_zookeeper.py, shared with tests/cluster
zookeeper_factory = cluster_fixtures.zookeeper_factory
zookeeper = cluster_fixtures.zookeeper
cluster_factory = cluster_fixtures.cluster_factory

NPM_PACKAGES = ("prozess@0.7.0", "kafka@0.2.3")
NODE_CACHE = Path(os.environ.get("ODRADEK_NODE07_CACHE", Path.home() / ".cache" / "odradek" / "node07"))
JS_DIR = Path(__file__).parent / "js"
NPM_TIMEOUT_S = 180
DRIVER_TIMEOUT_S = 30


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the Kafka 0.7 npm clients must be tested in CI: {reason}")
    pytest.skip(reason)


def _installed() -> bool:
    modules = NODE_CACHE / "node_modules"
    return all((modules / name.split("@")[0] / "package.json").is_file() for name in NPM_PACKAGES)


@dataclass
class Node07:
    """Runs the JS drivers (tests/kafka07/js) with the npm cache on NODE_PATH."""

    node: str

    def run(self, driver: str, *args: object, timeout: float = DRIVER_TIMEOUT_S) -> dict:
        """The driver's JSON line; AssertionError when it fails."""
        returncode, result = self.attempt(driver, *args, timeout=timeout)
        assert returncode == 0, f"{driver} {args}: rc={returncode} {result}"
        return result

    def attempt(self, driver: str, *args: object, timeout: float = DRIVER_TIMEOUT_S) -> tuple[int, dict]:
        """(exit code, the driver's last JSON line) of a run that may fail; AssertionError without a line."""
        env = dict(os.environ, NODE_PATH=str(NODE_CACHE / "node_modules"))
        proc = subprocess.run([self.node, str(JS_DIR / driver), *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=timeout)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        assert lines, f"{driver} {args}: rc={proc.returncode} {proc.stdout} {proc.stderr}"
        return proc.returncode, json.loads(lines[-1])


@pytest.fixture(scope="session")
def node07() -> Node07:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        _unavailable("Node.js (node and npm) is not installed")
    if not _installed():
        NODE_CACHE.mkdir(parents=True, exist_ok=True)
        try:
            proc = subprocess.run([npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix",
                                   str(NODE_CACHE), *NPM_PACKAGES], capture_output=True, text=True,
                                  timeout=NPM_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _unavailable(f"npm install {' '.join(NPM_PACKAGES)} took over {NPM_TIMEOUT_S} s")
        if proc.returncode != 0 or not _installed():
            _unavailable(f"npm install {' '.join(NPM_PACKAGES)} failed: {proc.stderr[-800:]}")
    return Node07(node)


@dataclass
class Broker07:
    process: BrokerProcess
    kafka07_port: int  # 0.7 messages (magic 1)
    kafka06_port: int  # 0.6-format messages (magic 0)

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap


def broker07_settings(port: int, kafka07_port: int, kafka06_port: int, **more: str) -> dict[str, str]:
    return {"listeners": f"PLAINTEXT://127.0.0.1:{port},KAFKA07://127.0.0.1:{kafka07_port},"
                         f"KAFKA06://127.0.0.1:{kafka06_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KAFKA07:KAFKA07,KAFKA06:KAFKA07",
            "listener.name.kafka06.legacy.message.magic": "0",
            **more}


@pytest.fixture
def broker07_factory(tmp_path: Path) -> Iterator:
    """Start brokers with the three listeners: `broker07_factory(**{"log.segment.bytes": "1024"})`."""
    started: list[BrokerProcess] = []

    def make(**settings: str) -> Broker07:
        port, kafka07_port, kafka06_port = free_port(), free_port(), free_port()
        process = BrokerProcess(tmp_path / f"data-{len(started)}",
                                broker07_settings(port, kafka07_port, kafka06_port, **settings), port=port)
        started.append(process)
        process.start()
        return Broker07(process, kafka07_port, kafka06_port)

    yield make
    for process in started:
        process.stop()


@pytest.fixture(scope="module")
def broker07(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker07]:
    """A broker shared by a module's tests (each names its own topics)."""
    port, kafka07_port, kafka06_port = free_port(), free_port(), free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("broker07") / "data",
                            broker07_settings(port, kafka07_port, kafka06_port), port=port)
    process.start()
    yield Broker07(process, kafka07_port, kafka06_port)
    process.stop()
