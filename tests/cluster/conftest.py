"""Cluster fixtures: a real ZooKeeper server and clusters of real broker processes sharing it.

    def test_failover(cluster_factory):
        cluster = cluster_factory(3, settings={"default.replication.factor": "3"}).start()
        cluster.wait_ready()
        ...
        cluster.kill(1)
        wait_until(lambda: cluster.partition_state(topic, 0).leader in (2, 3), timeout=20)

`zookeeper` is a fresh ZooKeeperServer on a free loopback port (data in the test's tmp_path); without
java or Debian's ZooKeeper jars the tests that use it skip, except under CI (`CI` set) where that is a
failure. Each cluster of `cluster_factory` gets a chroot of its own on that server, so one test may run
several clusters side by side. Every wait is bounded: a broker that does not come up fails the test.
"""

from __future__ import annotations

import itertools
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest

from odradek.tools.cluster import ClusterView, PartitionState, read_metadata
from odradek.tools.common import bootstrap_admin
from odradek.tools.zookeeper import ZooKeeperServer, zookeeper_unavailable
from tests.conftest import BrokerProcess, Placement, free_port
from tests.interop.helpers import wait_until

SESSION_TIMEOUT_MS = 6000
METADATA_TIMEOUT_S = 5.0


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"ZooKeeper must be available in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def zookeeper_factory(tmp_path: Path) -> Iterator[Callable[..., ZooKeeperServer]]:
    """Unstarted ZooKeeperServers in tmp_path (`zookeeper_factory(port=..., tick_time_ms=...)`), stopped
    at teardown. Skips (fails under CI) where ZooKeeper cannot run."""
    reason = zookeeper_unavailable()
    if reason is not None:
        _unavailable(reason)
    made: list[ZooKeeperServer] = []
    counter = itertools.count(1)

    def make(**kwargs: Any) -> ZooKeeperServer:
        server = ZooKeeperServer(tmp_path / f"zookeeper-{next(counter)}", **kwargs)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()


@pytest.fixture
def zookeeper(zookeeper_factory: Callable[..., ZooKeeperServer]) -> ZooKeeperServer:
    """A fresh, running ZooKeeper server on a free loopback port."""
    return zookeeper_factory().start()


class Cluster:
    """Brokers 1..n (`BrokerProcess`es, each restartable on its port and data) of one cluster.

    Every broker gets `broker.id`, `zookeeper.connect` (the server plus this cluster's own chroot) and
    `zookeeper.session.timeout.ms` (6000 unless given), then `settings`, then its entry in `per_broker`.
    Nothing starts until `start()`. `bootstrap` lists every broker, running or not (their ports never
    change); `metadata()` and `wait_ready()` ask the running ones only. `hosts` places brokers elsewhere
    than on loopback (each on its address, run under its command prefix: a network namespace of its own,
    tests/faults/netns.py).
    """

    def __init__(self, base_dir: Path, zookeeper: ZooKeeperServer, n: int = 3,
                 settings: dict[str, Any] | None = None, per_broker: dict[int, dict[str, Any]] | None = None,
                 chroot: str | None = None, hosts: Mapping[int, Placement] | None = None) -> None:
        self.zookeeper = zookeeper
        self.chroot = chroot or f"/odradek-{uuid.uuid4().hex[:12]}"
        self.zk_connect = zookeeper.connect_string + self.chroot
        common = {"zookeeper.connect": self.zk_connect, "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                  **(settings or {})}
        base_dir.mkdir(parents=True, exist_ok=True)  # BrokerProcess writes its log beside its data dir
        self.brokers: dict[int, BrokerProcess] = {}
        for bid in range(1, n + 1):
            values = {"broker.id": bid, **common, **(per_broker or {}).get(bid, {})}
            placement = (hosts or {}).get(bid)
            where = {} if placement is None else {"host": placement.address,
                                                   "command_prefix": placement.command_prefix}
            self.brokers[bid] = BrokerProcess(base_dir / f"broker-{bid}", {k: str(v) for k, v in values.items()},
                                              **where)

    # -- processes ---------------------------------------------------------------------------------

    @property
    def ids(self) -> list[int]:
        return sorted(self.brokers)

    def running_ids(self) -> list[int]:
        return [bid for bid in self.ids if self.brokers[bid].is_running()]

    def add_listener(self, name: str) -> dict[int, int]:
        """Before the brokers start: each serves listener ``name`` on a free loopback port of its own beside
        PLAINTEXT on its bootstrap port; those ports, by broker id."""
        ports = {}
        for bid, broker in self.brokers.items():
            ports[bid] = free_port()
            broker.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},{name}://127.0.0.1:{ports[bid]}"
        return ports

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.brokers[bid].bootstrap for bid in self.ids)

    def _each(self, action: Callable[[BrokerProcess], Any], ids: list[int]) -> None:
        """Run `action` on those brokers in parallel (each start waits for its own ready line)."""
        if not ids:
            return
        with ThreadPoolExecutor(max_workers=len(ids)) as pool:
            futures = {bid: pool.submit(action, self.brokers[bid]) for bid in ids}
        errors = [f"broker {bid}: {f.exception()}" for bid, f in futures.items() if f.exception() is not None]
        if errors:
            raise RuntimeError("\n".join(errors))

    def start(self) -> "Cluster":
        """Start every broker that is not running, in parallel; RuntimeError (with their logs) if one fails."""
        self._each(BrokerProcess.start, [bid for bid in self.ids if not self.brokers[bid].is_running()])
        return self

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker: its ZooKeeper session lives on until the session timeout."""
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int) -> int | None:
        """Stop one broker gracefully (SIGTERM); its exit code."""
        return self.brokers[broker_id].stop()

    def restart(self, broker_id: int) -> BrokerProcess:
        """Stop (if running) and start one broker again on the same port and data."""
        return self.brokers[broker_id].restart()

    def stop_all(self) -> None:
        """Stop every broker: the others in parallel, then the controller. Stopped all at once, the last
        ones find no controller for their controlled shutdown and retry it until their retries run out
        (3 x 5 s by default, as long as BrokerProcess.stop waits before it kills)."""
        running = self.running_ids()
        try:
            controller = self.metadata(timeout=2.0).controller_id if running else -1
        except Exception:  # noqa: BLE001 - no answer: stop them all at once
            controller = -1
        self._each(BrokerProcess.stop, [bid for bid in self.ids if bid != controller])
        if controller in self.brokers:
            self.brokers[controller].stop()

    def logs(self, n: int = 3000) -> str:
        """The end of every broker's log, for assertion messages."""
        return "\n".join(f"--- broker {bid} ({self.brokers[bid].log_path}):\n{self.brokers[bid].log_tail(n)}"
                         for bid in self.ids)

    # -- what the cluster says -----------------------------------------------------------------------

    def admin(self, broker_ids: list[int] | None = None, **config: Any) -> Any:
        """A confluent-kafka AdminClient bootstrapped from those brokers (default: the running ones)."""
        ids = self.running_ids() if broker_ids is None else broker_ids
        return bootstrap_admin(",".join(self.brokers[bid].bootstrap for bid in ids), **config)

    def metadata(self, broker_id: int | None = None, timeout: float = METADATA_TIMEOUT_S) -> ClusterView:
        """Brokers, controller and every partition's leader, replicas and ISR, from one Metadata request
        (to `broker_id`, or to any running broker)."""
        return read_metadata(self.admin(None if broker_id is None else [broker_id]), timeout)

    def partition_state(self, topic: str, partition: int, broker_id: int | None = None) -> PartitionState:
        """Leader, replicas and ISR of one partition; KeyError if the metadata does not have it."""
        return self.metadata(broker_id).partition(topic, partition)

    def wait_ready(self, timeout: float = 30.0) -> ClusterView:
        """Wait until every running broker lists every running broker and names a running controller;
        returns the last broker's view. AssertionError (with what each broker last said) on timeout."""
        last: dict[int, ClusterView | str] = {}

        def ready() -> ClusterView | None:
            running = self.running_ids()
            if not running:
                return None
            view = None
            for bid in running:
                try:
                    view = self.metadata(bid, timeout=min(METADATA_TIMEOUT_S, timeout))
                except Exception as exc:  # noqa: BLE001 - not up yet: asked again until the deadline
                    last[bid] = repr(exc)
                    return None
                last[bid] = view
                if not set(running) <= set(view.brokers) or view.controller_id not in running:
                    return None
            return view

        try:
            return wait_until(ready, timeout=timeout, interval=0.2, message="the cluster to be ready")
        except AssertionError as exc:
            said = "\n".join(f"  broker {bid}: " + (v if isinstance(v, str) else
                                                    f"brokers {sorted(v.brokers)}, controller {v.controller_id}")
                             for bid, v in sorted(last.items()))
            raise AssertionError(f"{exc}; running {self.running_ids()}; last answers:\n{said}\n{self.logs()}") from None


@pytest.fixture
def cluster_factory(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Build clusters on the test's ZooKeeper: `cluster_factory(3, settings={...}, per_broker={2: {...}})`
    returns an unstarted Cluster; every cluster's brokers are stopped at teardown."""
    made: list[Cluster] = []
    counter = itertools.count(1)

    def make(n: int = 3, settings: dict[str, Any] | None = None,
             per_broker: dict[int, dict[str, Any]] | None = None) -> Cluster:
        cluster = Cluster(tmp_path / f"cluster-{next(counter)}", zookeeper, n, settings, per_broker)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop_all()
