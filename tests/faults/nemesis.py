"""The soak: a three-broker cluster under random faults for a while, with clients running throughout, checked
for safety at the end and for liveness after every fault. One engine, `run_soak`, serves `make soak`
(bench/soak.py, minutes of faults) and the short run of `make test` (tests/faults/test_soak_short.py, one
fault of each kind).

The cluster: ZooKeeper and brokers 1-3, each in a network namespace of its own (tests/faults/netns.py) where
root and iproute2 allow, else all on loopback (then without the network partition, the one fault loopback
cannot make). Everything replicated three ways with min.insync.replicas=2 (tests/cluster/common.py's
REPLICATED), and zookeeper.session.timeout.ms=6000: the fault tests' value (tests/cluster/conftest.py). Kafka's
default of 18 s would make every kill or pause wait three times longer for the session to expire, so a
15-minute soak would see a third of the faults; 6 s is still three times ZooKeeper's tick-based minimum here
and well above the pauses a loaded 2-core machine gives a Python broker (a broker that misses it is fenced,
which the soak would then report as a fault of its own). replica.lag.time.max.ms is as long as the session.

The clients (tests/faults/soak_workloads.py): an idempotent producer, a transactional consume-transform-produce
loop, two consumer group members with a sampler of their committed offsets, and the Java client's producer.

The faults, one at a time, drawn from a seeded random generator, each healed after a bounded time:
kill -9 of a broker (not the controller) and restart; kill -9 of the controller and restart; SIGSTOP past the
session timeout, then SIGCONT; a broker cut from ZooKeeper and the other brokers (clients still reach it);
ZooKeeper stopped and started again; SIGTERM (controlled shutdown) and restart. After each heal the run waits
for every client to make progress again, then for every partition (internal ones too) to have a leader and
its full ISR, then a few quiet seconds, before the next fault.

**Liveness deadline** (LIVENESS_DEADLINE_S, from the heal): every client must make progress again within

    session timeout (6 s: a dead or cut-off broker's session expires, a restarted broker's previous session
                     with it, and only then does it register)
  + election (5 s: the controller sees the expiry, elects leaders, sends LeaderAndIsr/UpdateMetadata)
  + metadata refresh (1 s: librdkafka's and the Java client's retry.backoff.max.ms after a leader error)
  + request timeout (30 s: librdkafka's and the Java client's request.timeout.ms, for a request sent into a
                     paused or cut-off broker before the heal, which the client must time out and resend;
                     the transactional loop sets librdkafka's socket.timeout.ms, what its coordinator
                     requests wait, to the same 30 s, and gives up a transactional call that librdkafka never
                     returns 25 + 5 s after it began, making a new producer: soak_workloads.TransformLoop)
  + load margin (8 s: broker start-up and scheduling on a 2-core machine shared with ZooKeeper, a JVM
                 client and the Python clients)
  = 50 s.

A client that makes no progress within it is a liveness failure naming the fault. The figures per fault:
the producer's unavailability (the longest time any partition of the input topic went without an
acknowledgement, from the fault on) and each client's recovery (time from the heal to its first progress,
and its longest stall from the fault on).
"""

from __future__ import annotations

import os
import random
import re
import signal
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from threading import Event, Lock, Thread
from typing import Callable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from odradek.tools.cluster import read_metadata
from odradek.tools.zookeeper import ZooKeeperServer
from tests.cluster.common import REPLICATED
from tests.cluster.conftest import Cluster
from tests.faults.netns import Network, netns_unavailable
from tests.faults.soak_workloads import (GroupWorkload, IdempotentWorkload, JavaProducer, TransformLoop, Workload,
                                         compile_java_harness)

SESSION_TIMEOUT_S = 6.0
ELECTION_S = 5.0
METADATA_REFRESH_S = 1.0
REQUEST_TIMEOUT_S = 30.0
LOAD_MARGIN_S = 8.0
LIVENESS_DEADLINE_S = SESSION_TIMEOUT_S + ELECTION_S + METADATA_REFRESH_S + REQUEST_TIMEOUT_S + LOAD_MARGIN_S
HEALTHY_DEADLINE_S = 120.0  # every partition led and fully in sync again after a heal
WARM_UP_DEADLINE_S = 180.0  # every client making progress before the first fault
BROKERS = 3
PARTITIONS = 3
INTERNAL = ("__consumer_offsets", "__transaction_state")

SETTINGS = {**REPLICATED, "zookeeper.session.timeout.ms": str(int(SESSION_TIMEOUT_S * 1000)),
            "replica.lag.time.max.ms": str(int(SESSION_TIMEOUT_S * 1000))}

KINDS = ("kill", "kill_controller", "pause", "partition", "zk_restart", "sigterm")
KIND_TITLES = {"kill": "kill -9 of a broker", "kill_controller": "kill -9 of the controller",
               "pause": "SIGSTOP past the session", "partition": "network partition of a broker",
               "zk_restart": "ZooKeeper restart", "sigterm": "controlled shutdown (SIGTERM)"}
LOG_PROBLEMS = re.compile(r"Traceback|never retrieved")


@dataclass
class SoakConfig:
    minutes: float = 15.0
    seed: int = 0
    one_each: bool = False  # one fault of each kind (in a seeded order) instead of `minutes` of random ones
    java: bool = True
    netns: bool | None = None  # None: namespaces where they can be made, else loopback


@dataclass
class FaultRecord:
    kind: str
    target: str
    t_fault: float
    hold_s: float
    t_heal: float = 0.0
    t_next: float = 0.0  # when the next fault came (or the run ended): the window of its figures
    unavailable_s: float | None = None
    recovery_s: dict[str, float | None] = field(default_factory=dict)  # heal -> first progress
    stall_s: dict[str, float] = field(default_factory=dict)  # longest stall from the fault on
    healthy_s: float | None = None  # heal -> every partition led and in sync
    failures: list[str] = field(default_factory=list)

    def as_json(self, t0: float) -> dict:
        return {"kind": self.kind, "target": self.target, "at_s": round(self.t_fault - t0, 2),
                "hold_s": round(self.hold_s, 2), "unavailable_s": _r(self.unavailable_s),
                "recovery_s": {k: _r(v) for k, v in self.recovery_s.items()},
                "stall_s": {k: _r(v) for k, v in self.stall_s.items()}, "healthy_s": _r(self.healthy_s),
                "failures": self.failures}


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@dataclass
class SoakResult:
    config: SoakConfig
    placement: str = ""
    java: str = ""  # the Java client's version, or why it did not run
    faults: list[FaultRecord] = field(default_factory=list)
    safety: list[str] = field(default_factory=list)
    liveness: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)  # tracebacks and unretrieved task exceptions in broker logs
    counts: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    work_dir: str = ""
    t0: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.safety or self.liveness or self.logs)

    def __str__(self) -> str:
        head = (f"{len(self.faults)} faults on {self.placement} in {self.wall_s:.0f} s, seed {self.config.seed}; "
                f"{self.counts}")
        parts = [(name, getattr(self, name)) for name in ("safety", "liveness", "logs")]
        found = [f"{name}: " + "; ".join(items[:8]) for name, items in parts if items]
        return head + (": clean" if not found else "\n" + "\n".join(found) + f"\nlogs in {self.work_dir}")

    def by_kind(self) -> dict[str, dict]:
        """Per fault kind: the producer's unavailability and each client's recovery (median, max)."""
        out: dict[str, dict] = {}
        for kind in KINDS:
            records = [f for f in self.faults if f.kind == kind]
            if not records:
                continue
            unavailable = [f.unavailable_s for f in records if f.unavailable_s is not None]
            clients = sorted({c for f in records for c in f.recovery_s})
            recovery = {}
            for client in clients:
                after = [f.recovery_s.get(client) for f in records]
                stalls = [f.stall_s[client] for f in records if client in f.stall_s]
                done = [a for a in after if a is not None]
                recovery[client] = {"after_heal_median_s": _r(statistics.median(done)) if done else None,
                                    "after_heal_max_s": _r(max(done)) if done else None,
                                    "stall_max_s": _r(max(stalls)) if stalls else None,
                                    "stuck": sum(a is None for a in after)}
            out[kind] = {"faults": len(records),
                         "unavailable_median_s": _r(statistics.median(unavailable)) if unavailable else None,
                         "unavailable_max_s": _r(max(unavailable)) if unavailable else None,
                         "recovery": recovery}
        return out

    def as_json(self) -> dict:
        return {"minutes": self.config.minutes, "seed": self.config.seed, "one_each": self.config.one_each,
                "placement": self.placement, "java": self.java, "ok": self.ok, "wall_s": round(self.wall_s, 1),
                "liveness_deadline_s": LIVENESS_DEADLINE_S, "session_timeout_s": SESSION_TIMEOUT_S,
                "settings": SETTINGS, "counts": self.counts, "by_kind": self.by_kind(),
                "faults": [f.as_json(self.t0) for f in self.faults], "safety": self.safety,
                "liveness": self.liveness, "logs": self.logs, "work_dir": self.work_dir}


class SoakAborted(Exception):
    """The cluster could not be brought back after a fault: the run ends with what it has."""

    def __init__(self, record: FaultRecord) -> None:
        super().__init__(record.failures[-1])
        self.record = record


class ProgressLog:
    """Samples every client's progress counter every 50 ms on a thread; keeps the times it grew."""

    def __init__(self, counters: dict[str, Callable[[], int]]) -> None:
        self.counters = counters
        self.times: dict[str, list[float]] = {name: [] for name in counters}
        self._last = {name: 0 for name in counters}
        self._lock = Lock()
        self._stop = Event()
        self._thread = Thread(target=self._run, name="progress", daemon=True)

    def start(self) -> "ProgressLog":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            now = time.monotonic()
            for name, counter in self.counters.items():
                value = counter()
                if value > self._last[name]:
                    self._last[name] = value
                    with self._lock:
                        self.times[name].append(now)

    def first_after(self, name: str, since: float) -> float | None:
        with self._lock:
            return next((t for t in self.times[name] if t > since), None)

    def longest_gap(self, name: str, start: float, end: float) -> float:
        with self._lock:
            points = [start] + [t for t in self.times[name] if start < t <= end] + [end]
        return max(b - a for a, b in zip(points, points[1:]))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class SoakCluster:
    """ZooKeeper and three brokers, each on a host of its own where namespaces can be made, else on loopback;
    the faults as methods. `close()` stops everything and removes the namespaces."""

    def __init__(self, work_dir: Path, netns: bool | None) -> None:
        why = netns_unavailable() if netns is not False else "loopback was asked for"
        if netns and why:
            raise RuntimeError(f"network namespaces cannot be made here: {why}")
        self.network: Network | None = None
        self.zookeeper: ZooKeeperServer | None = None
        self.cluster: Cluster | None = None
        try:
            hosts = None
            if why is None:
                self.network = Network.create()
                zk_host = self.network.add_host("zk")
                self.zookeeper = ZooKeeperServer(work_dir / "zookeeper", host=zk_host.address, port=2181,
                                                 command_prefix=zk_host.command_prefix)
                hosts = {bid: self.network.add_host(f"b{bid}") for bid in range(1, BROKERS + 1)}
                self.placement = "network namespaces (ZooKeeper and each broker a host of its own)"
            else:
                self.zookeeper = ZooKeeperServer(work_dir / "zookeeper")
                self.placement = f"loopback (no network partitions: {why})"
            self.zookeeper.start()
            self.cluster = Cluster(work_dir / "cluster", self.zookeeper, BROKERS, SETTINGS, hosts=hosts)
            self.cluster.start()
            self.cluster.wait_ready(timeout=90)
        except BaseException:
            self.close()
            raise

    @property
    def kinds(self) -> tuple[str, ...]:
        return KINDS if self.network is not None else tuple(k for k in KINDS if k != "partition")

    @property
    def bootstrap(self) -> str:
        assert self.cluster is not None
        return self.cluster.bootstrap

    def controller(self) -> int:
        return read_metadata(self.admin(), 5.0).controller_id

    def admin(self):  # noqa: ANN201 - a confluent-kafka AdminClient
        assert self.cluster is not None
        return self.cluster.admin()

    def create_topics(self, names: list[str]) -> None:
        admin = self.admin()
        for name, future in admin.create_topics([NewTopic(n, PARTITIONS, BROKERS) for n in names]).items():
            future.result(60)

    def unhealthy(self) -> str | None:
        """Why the cluster is not whole (a broker missing, a partition without a leader or a full ISR)."""
        try:
            view = read_metadata(self.admin(), 5.0, INTERNAL)
        except Exception as exc:  # noqa: BLE001 - no answer is an answer here
            return f"no metadata: {exc}"
        if set(view.brokers) != set(self.ids) or view.controller_id not in self.ids:
            return f"brokers {sorted(view.brokers)}, controller {view.controller_id}"
        bad = [f"{s.topic}-{s.partition} leader {s.leader} isr {sorted(s.isr)}" for s in view.partitions()
               if s.leader < 0 or len(s.isr) < len(s.replicas)]
        return f"{len(bad)} partitions not whole, e.g. {bad[:3]}" if bad else None

    # the primitives the faults are made of (a cluster of another broker implements the same: bench/soak.py)

    @property
    def ids(self) -> list[int]:
        assert self.cluster is not None
        return self.cluster.ids

    def kill_broker(self, bid: int) -> None:
        assert self.cluster is not None
        self.cluster.kill(bid)

    def terminate_broker(self, bid: int) -> None:
        """SIGTERM (a controlled shutdown), waiting for the exit."""
        assert self.cluster is not None
        self.cluster.stop(bid)

    def start_broker(self, bid: int) -> None:
        assert self.cluster is not None
        self._start(self.cluster.broker(bid).start)

    def signal_broker(self, bid: int, sig: int) -> None:
        assert self.cluster is not None
        proc = self.cluster.broker(bid).proc
        assert proc is not None
        os.kill(proc.pid, sig)

    def isolate_broker(self, bid: int) -> Callable[[], None]:
        """Cut the broker from ZooKeeper and the other brokers (clients still reach it); the heal."""
        assert self.network is not None and self.cluster is not None
        address = self.cluster.broker(bid).host
        self.network.isolate(next(h for h in self.network.hosts.values() if h.address == address))
        return self.network.heal_all

    def restart_zookeeper(self, rng: random.Random) -> tuple[str, float, Callable[[], None]]:
        assert self.zookeeper is not None
        self.zookeeper.stop()
        return "zookeeper", rng.uniform(1.0, SESSION_TIMEOUT_S), lambda: self._start(self.zookeeper.start)

    def inject(self, kind: str, rng: random.Random) -> tuple[str, float, Callable[[], None]]:
        """Break the cluster: what was hit, how long to hold the fault, and the heal."""
        if kind == "zk_restart":
            return self.restart_zookeeper(rng)
        controller = self.controller()
        if kind == "kill_controller":
            victim = controller
        elif kind == "kill":
            victim = rng.choice([b for b in self.ids if b != controller])
        else:
            victim = rng.choice(self.ids)
        target = f"broker {victim}" + (" (controller)" if victim == controller else "")
        if kind in ("kill", "kill_controller"):
            self.kill_broker(victim)
            return target, rng.uniform(1.0, 5.0), lambda: self.start_broker(victim)
        if kind == "sigterm":
            self.terminate_broker(victim)
            return target, rng.uniform(1.0, 3.0), lambda: self.start_broker(victim)
        if kind == "pause":
            self.signal_broker(victim, signal.SIGSTOP)
            return target, SESSION_TIMEOUT_S + rng.uniform(1.0, 4.0), lambda: self.signal_broker(victim, signal.SIGCONT)
        if kind == "partition":
            return target, SESSION_TIMEOUT_S + rng.uniform(1.0, 6.0), self.isolate_broker(victim)
        raise ValueError(f"unknown fault kind {kind!r}")

    @staticmethod
    def _start(start: Callable[[], object], attempts: int = 3) -> None:
        """Start a process again; a start that fails (a loaded machine) is tried again."""
        for attempt in range(attempts):
            try:
                start()
                return
            except Exception:  # noqa: BLE001 - RuntimeError/ZooKeeperError with the log: tried again
                if attempt == attempts - 1:
                    raise

    def heal_everything(self) -> None:
        """Whatever a failed run left broken: cuts healed, paused brokers continued, stopped ones started."""
        if self.network is not None:
            self.network.heal_all()
        if self.cluster is not None:
            for broker in self.cluster.brokers.values():
                if broker.proc is not None and broker.proc.poll() is None:
                    os.kill(broker.proc.pid, signal.SIGCONT)
        if self.zookeeper is not None and not self.zookeeper.is_running():
            self._start(self.zookeeper.start)
        if self.cluster is not None:
            self.cluster.start()

    def log_problems(self) -> list[str]:
        """Tracebacks and unretrieved task exceptions in the brokers' logs."""
        found = []
        if self.cluster is None:
            return found
        for bid, broker in self.cluster.brokers.items():
            try:
                lines = broker.log_path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            shown_until = -1
            for i, line in enumerate(lines):
                if i > shown_until and LOG_PROBLEMS.search(line):
                    shown_until = i + 6  # one entry per traceback
                    context = " | ".join(lines[max(0, i - 1):i + 6])
                    found.append(f"broker {bid} ({broker.log_path}) line {i + 1}: {context[:1500]}")
        return found

    def close(self) -> None:
        if self.network is not None:
            self.network.heal_all()
        if self.cluster is not None:
            for broker in self.cluster.brokers.values():
                if broker.proc is not None and broker.proc.poll() is None:
                    os.kill(broker.proc.pid, signal.SIGCONT)
            for broker in self.cluster.brokers.values():
                broker.kill()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        if self.network is not None:
            self.network.close()


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-ends", "broker.address.family": "v4",
                         "log_level": 3})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _wait(condition: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def run_soak(config: SoakConfig, work_dir: Path, log: Callable[[str], None] = print,
             make_cluster: Callable[[Path], SoakCluster] | None = None) -> SoakResult:
    """Run the soak in `work_dir` (broker and ZooKeeper logs stay there); the result, never raising for what
    the cluster or the clients did wrong (that is in the result). `make_cluster` builds another cluster with
    SoakCluster's interface (bench/soak.py's Apache Kafka cluster); by default odradek's."""
    rng = random.Random(config.seed)
    result = SoakResult(config, work_dir=str(work_dir), t0=time.monotonic())
    work_dir.mkdir(parents=True, exist_ok=True)
    soak = make_cluster(work_dir) if make_cluster is not None else SoakCluster(work_dir, config.netns)
    result.placement = soak.placement
    run = f"soak-{uuid.uuid4().hex[:6]}"
    source, sink, java_topic = f"{run}-in", f"{run}-out", f"{run}-java"
    # how long the producers are sized to write for: well past the faults (a slow heal, a slow start of a JVM),
    # so that a producer never runs out of records while the run still waits for its progress
    run_s = (len(soak.kinds) * 300.0 if config.one_each else config.minutes * 60.0) + 1800.0
    workloads: list[Workload] = []
    stopped: list[Workload] = []  # those _finish stopped (each is stopped once)
    progress: ProgressLog | None = None
    try:
        soak.create_topics([source, sink, java_topic])
        bootstrap = soak.bootstrap
        producer = IdempotentWorkload(bootstrap, source, PARTITIONS, run_s).start()
        workloads.append(producer)
        loop = TransformLoop(bootstrap, source, sink, PARTITIONS, f"{run}-ctp", f"{run}-txn",
                             debug_log=work_dir / "librdkafka-txn.log").start()
        workloads.append(loop)
        group = GroupWorkload(bootstrap, source, PARTITIONS, f"{run}-group", run_s).start()
        workloads.append(group)
        counters: dict[str, Callable[[], int]] = {w.name: w.progress for w in workloads}
        counters["group commits"] = group.committed_progress
        if config.java:
            compiled = compile_java_harness(work_dir)
            if isinstance(compiled, str):
                result.java = f"not run: {compiled}"
            else:
                command, version = compiled
                result.java = f"kafka-clients {version}"
                java = JavaProducer(command, bootstrap, java_topic, PARTITIONS, run_s, work_dir / "java-producer.log")
                workloads.append(java)
                counters[java.name] = java.progress
        else:
            result.java = "not run: disabled"
        progress = ProgressLog(counters).start()
        log(f"soak on {soak.placement}; clients {list(counters)}; Java: {result.java}")
        t_start = time.monotonic()
        if not _wait(lambda: all(progress.first_after(n, t_start) for n in counters)
                     and soak.unhealthy() is None, WARM_UP_DEADLINE_S, 0.5):
            stuck = [n for n in counters if not progress.first_after(n, t_start)]
            result.liveness.append(f"warm-up: no progress within {WARM_UP_DEADLINE_S:.0f} s from {stuck}; "
                                   f"cluster: {soak.unhealthy()}")
            return result
        plan = list(soak.kinds)
        rng.shuffle(plan)
        t_end = time.monotonic() + config.minutes * 60.0
        try:
            while plan if config.one_each else time.monotonic() < t_end:
                kind = plan.pop() if config.one_each else rng.choice(soak.kinds)
                result.faults.append(_one_fault(soak, kind, rng, progress, result, log,
                                                {w.name: w for w in workloads}))
                time.sleep(rng.uniform(2.0, 5.0))  # quiet between faults
        except SoakAborted as aborted:
            result.faults.append(aborted.record)
            return result
        _finish(soak, result, producer, loop, group, workloads, stopped, source, log)
    finally:
        for workload in workloads:
            if workload in stopped:
                continue
            try:
                workload.stop()
            except Exception as exc:  # noqa: BLE001 - a client that does not stop is reported, teardown goes on
                result.liveness.append(f"{workload.name} did not stop: {exc}; it is in {workload.state()}")
        if progress is not None:
            progress.stop()
            _figures(result, progress, workloads)
        result.logs = soak.log_problems()
        try:
            soak.close()
        except Exception as exc:  # noqa: BLE001 - reported; the result stands
            result.liveness.append(f"teardown failed: {str(exc)[:500]}")
        result.wall_s = time.monotonic() - result.t0
    return result


def _one_fault(soak: SoakCluster, kind: str, rng: random.Random, progress: ProgressLog, result: SoakResult,
               log: Callable[[str], None], workloads: dict[str, Workload]) -> FaultRecord:
    t_fault = time.monotonic()
    target, hold_s, heal = soak.inject(kind, rng)
    record = FaultRecord(kind, target, t_fault, hold_s)
    log(f"[{t_fault - result.t0:7.1f} s] {KIND_TITLES[kind]}: {target}, healed after {hold_s:.1f} s")
    time.sleep(max(0.0, t_fault + hold_s - time.monotonic()))
    try:
        heal()
    except Exception as exc:  # noqa: BLE001 - a heal that fails is a failure of the run, named
        record.failures.append(f"heal of {kind} ({target}) failed: {str(exc)[:500]}")
        try:
            soak.heal_everything()
        except Exception as again:  # noqa: BLE001 - nothing to soak any more: the run ends here
            record.failures.append(f"the cluster could not be healed: {str(again)[:500]}")
            result.liveness.extend(record.failures)
            raise SoakAborted(record) from again
    record.t_heal = time.monotonic()
    names = list(progress.counters)
    # both at once: the clients' progress (until the liveness deadline) and the cluster whole again
    healthy_deadline = record.t_heal + HEALTHY_DEADLINE_S
    while time.monotonic() < healthy_deadline:
        progressed = all(progress.first_after(n, record.t_heal) for n in names)
        if record.healthy_s is None and soak.unhealthy() is None:
            record.healthy_s = time.monotonic() - record.t_heal
        if progressed and record.healthy_s is not None:
            break
        if not progressed and time.monotonic() > record.t_heal + LIVENESS_DEADLINE_S:
            break
        time.sleep(0.2)
    if record.healthy_s is None and _wait(lambda: soak.unhealthy() is None, healthy_deadline - time.monotonic(), 0.5):
        record.healthy_s = time.monotonic() - record.t_heal
    for name in names:
        first = progress.first_after(name, record.t_heal)
        record.recovery_s[name] = None if first is None else first - record.t_heal
        if first is None or first - record.t_heal > LIVENESS_DEADLINE_S:
            where = workloads[name].state() if name in workloads else ""
            record.failures.append(f"{name}: no progress within {LIVENESS_DEADLINE_S:.0f} s after "
                                   f"{KIND_TITLES[kind]} ({target}) healed" + (f"; it is in {where}" if where else ""))
    if record.healthy_s is None:
        record.failures.append(f"cluster not whole {HEALTHY_DEADLINE_S:.0f} s after {KIND_TITLES[kind]} ({target}) "
                               f"healed: {soak.unhealthy()}")
    result.liveness.extend(record.failures)
    recovered = ", ".join(f"{n} {v:.1f} s" if v is not None else f"{n} STUCK" for n, v in record.recovery_s.items())
    log(f"           healed; progress after the heal: {recovered}; whole after "
        f"{record.healthy_s if record.healthy_s is None else round(record.healthy_s, 1)} s")
    for failure in record.failures:
        log(f"           FAILED: {failure}")
    if record.failures:
        wall_fault = time.time() - (time.monotonic() - record.t_fault)
        for name, workload in workloads.items():
            for line in workload.stall_account(since=wall_fault) if name in _stuck(record) else []:
                log(f"           {name}: {line}")
    return record


def _stuck(record: FaultRecord) -> set[str]:
    return {name for name, first in record.recovery_s.items() if first is None or first > LIVENESS_DEADLINE_S}


def _finish(soak: SoakCluster, result: SoakResult, producer: IdempotentWorkload, loop: TransformLoop,
            group: GroupWorkload, workloads: list[Workload], stopped: list[Workload], source: str,
            log: Callable[[str], None]) -> None:
    """Stop the producers, let the loop and the group read to the end, then check every client's history."""
    soak.heal_everything()
    if not _wait(lambda: soak.unhealthy() is None, HEALTHY_DEADLINE_S, 0.5):
        result.liveness.append(f"cluster not whole at the end: {soak.unhealthy()}")
    for workload in workloads:
        if not isinstance(workload, (TransformLoop, GroupWorkload)):
            stopped.append(workload)
            workload.stop()
    bootstrap = soak.bootstrap
    ends = _ends(bootstrap, source)
    log(f"producers stopped; input ends {ends}; waiting for the loop and the group to read to the end")

    def loop_done() -> bool:
        try:
            committed = loop.positions_committed()
        except Exception:  # noqa: BLE001 - asked again
            return False
        return all(committed.get(p, -1) >= end for p, end in ends.items())

    if not _wait(loop_done, LIVENESS_DEADLINE_S * 2, 1.0):
        result.liveness.append(f"{loop.name}: input not finished {LIVENESS_DEADLINE_S * 2:.0f} s after the last "
                               f"write (committed {loop.positions_committed()}, ends {ends}); it is in {loop.state()}")
    if not group.wait_committed(ends, LIVENESS_DEADLINE_S * 2):
        result.liveness.append(f"{group.name}: committed offsets short of {ends} {LIVENESS_DEADLINE_S * 2:.0f} s "
                               f"after the last write")
    for workload in (loop, group):
        stopped.append(workload)
        try:
            workload.stop()
        except Exception as exc:  # noqa: BLE001 - named; the checks still run
            result.liveness.append(f"{workload.name} did not stop: {exc}; it is in {workload.state()}")
    for workload in workloads:
        try:
            result.safety.extend(workload.check(bootstrap))
        except Exception as exc:  # noqa: BLE001 - a check that cannot read is a failure, named
            result.safety.append(f"{workload.name}: check failed: {exc!r}")
    result.counts = {"acknowledged": producer.ledger.count(), "transactions committed": loop.committed,
                     "transactions aborted": len(loop.aborted_txns),
                     "records given to the group": group.progress(),
                     # librdkafka's send_offsets_to_transaction blocked for good (#5456/#5511): producer made anew
                     "loop producers abandoned": len(loop.blocked_calls)}
    java = next((w for w in workloads if isinstance(w, JavaProducer)), None)
    if java is not None:
        result.counts["Java acknowledged"] = java.ledger.count()


def _figures(result: SoakResult, progress: ProgressLog, workloads: list[Workload]) -> None:
    """Each fault's unavailability (from the producer's acknowledgements per partition) and stalls."""
    producer = next((w for w in workloads if isinstance(w, IdempotentWorkload)), None)
    end = time.monotonic()
    for i, record in enumerate(result.faults):
        record.t_next = result.faults[i + 1].t_fault if i + 1 < len(result.faults) else end
        for name in record.recovery_s:
            first = progress.first_after(name, record.t_heal)
            record.stall_s[name] = progress.longest_gap(name, record.t_fault, first or record.t_next)
        if producer is not None:
            times = producer.ledger.ack_times
            gaps = []
            for p in range(PARTITIONS):
                points = [record.t_fault] + [t for t, q in times if q == p and record.t_fault < t <= record.t_next]
                first_after_heal = next((t for t in points[1:] if t > record.t_heal), None)
                if first_after_heal is None:
                    gaps.append(None)
                    continue
                points = [t for t in points if t <= first_after_heal]
                gaps.append(max(b - a for a, b in zip(points, points[1:])))
            record.unavailable_s = None if None in gaps else max(gaps)
