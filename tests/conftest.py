"""Fixtures that start a real odradek broker process on a free loopback port.

Tests never mock the broker: each gets a `BrokerProcess` whose bootstrap address real clients connect to.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Iterator, Protocol, Sequence

import pytest

READY_MARKER = "odradek: accepting connections on "
START_TIMEOUT_S = 20.0


def free_port() -> int:
    from odradek.tools.zookeeper import pick_free_port

    return pick_free_port("127.0.0.1")


class Placement(Protocol):
    """Where a process runs: the address it listens on (and advertises) and the command prefix that puts it
    there (`ip netns exec NS` for a host of its own, tests/faults/netns.py; nothing for loopback)."""

    address: str
    command_prefix: Sequence[str]


# What a broker's log must never show: each is a bug (an unhandled exception, a task whose failure nobody
# read). tests/conftest.py's check_broker_logs fails the test during which such a line was written.
LOG_PROBLEMS = ("Traceback (most recent call last)", "exception was never retrieved")


class BrokerProcess:
    """One `odradek serve` process; restartable on the same port and data directory.

    It listens on (and so advertises) `host`, loopback unless given; `command_prefix` runs it elsewhere,
    e.g. inside a network namespace. The port is picked free on loopback here, which is also free in a
    fresh namespace.
    """

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None, port: int | None = None,
                 args: Iterable[str] = (), host: str = "127.0.0.1", command_prefix: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        self.settings = dict(settings or {})
        self.args = list(args)  # more `odradek serve` options
        self.host = host
        self.command_prefix = list(command_prefix)
        self.port = port or free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"
        self._log_checked = 0  # bytes of the log already looked at by log_problems

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "BrokerProcess":
        # with a `listeners` setting, `port` is one of those the test gave it (its bootstrap)
        listen = [] if "listeners" in self.settings else ["--listen", self.bootstrap]
        cmd = [*self.command_prefix, sys.executable, "-m", "odradek", "serve", *listen,
               "--data-dir", str(self.data_dir)]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        cmd += self.args
        if self not in STARTED:
            STARTED.append(self)
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"broker exited with {self.proc.wait()}; log: {self.log_tail()}")
            if line.startswith(READY_MARKER):
                return self
        raise RuntimeError(f"broker did not become ready; log: {self.log_tail()}")

    def log_problems(self) -> list[str]:
        """LOG_PROBLEMS lines written since the last call, each with the lines that follow it."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_checked)
                data = f.read()
        except OSError:
            return []
        self._log_checked += len(data)
        lines = data.decode(errors="replace").splitlines()
        return ["\n".join(lines[max(0, i - 1):i + 12]) for i, line in enumerate(lines)
                if any(problem in line for problem in LOG_PROBLEMS)]

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text()[-n:]
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> int | None:
        """Graceful stop (SIGTERM); returns the exit code."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def kill(self) -> None:
        """Crash the broker with SIGKILL: nothing is flushed or closed."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


STARTED: list[BrokerProcess] = []  # every broker process of this pytest process, for check_broker_logs


@pytest.fixture(autouse=True)
def check_broker_logs() -> Iterator[None]:
    """Fail the test during which a broker logged a traceback or an unretrieved task exception (it runs
    after the test's own fixtures have stopped their brokers, so their last lines count)."""
    yield
    found = [f"{b.log_path}:\n{problem}" for b in STARTED for problem in b.log_problems()]
    STARTED[:] = [b for b in STARTED if b.is_running()]  # a stopped one was read to its end just now
    if found:
        pytest.fail("a broker logged what it never should:\n" + "\n\n".join(found[:5]), pytrace=False)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    """Start brokers with custom settings: `broker_factory({"num.partitions": "3"})`, and other `serve`
    options: `broker_factory(args=["--event-loop", "asyncio"])`."""
    started: list[BrokerProcess] = []

    def make(settings: dict[str, str] | None = None, name: str = "data", args: Iterable[str] = ()) -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, settings, args=args)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker shared by the tests of one module (topics are named per test to keep them apart)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data")
    b.start()
    yield b
    b.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test, valid under Kafka's naming rules."""
    base = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    return "t-" + "".join(c if c.isalnum() or c in "._-" else "-" for c in base)[:180]


os.environ.setdefault("PYTHONUNBUFFERED", "1")


# -- running on two workers (pytest-xdist, `make test`) -------------------------------------------------------

# Work that one worker should do whole: what shares a session's JVM (Spark's, Apache Kafka's) runs on one
# worker, so neither is started twice. Everything else is grouped by module, so module fixtures start once.
SHARED_SESSIONS = (("spark", "spark"), ("kafka_reference", "reference"))
# Longest groups first: with --no-loadscope-reorder (as `make test` runs it) xdist hands groups out in
# collection order; otherwise pytest-xdist 3.x orders them by their number of tests.
# Collection happens on the workers, where xdist sets `dist` to "no" and `loadgroup` to whether the run is
# --dist loadgroup; the hook runs first (tryfirst) so that xdist's own hook finds the markers and appends each
# group to its tests' ids, which is how the controller schedules them.
GROUP_ORDER = ("spark", "tests/faults", "reference", "tests/packaging", "tests/security", "tests/cluster",
               "tests/kafka_tools")


def xdist_group(item: pytest.Item) -> str:
    for fixture, group in SHARED_SESSIONS:
        if fixture in item.fixturenames or item.nodeid.startswith(f"tests/{group}/"):
            return group
    return item.nodeid.split("::", 1)[0]


def group_rank(group: str) -> int:
    for rank, prefix in enumerate(GROUP_ORDER):
        if group.startswith(prefix):
            return rank
    return len(GROUP_ORDER)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        return
    groups = {id(item): xdist_group(item) for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    items.sort(key=lambda item: group_rank(groups[id(item)]))
