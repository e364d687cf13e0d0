"""`odradek cluster`: run a local cluster (ZooKeeper and N brokers) and describe any Kafka-compatible cluster.

    odradek cluster run [--brokers 3] [--base-port 9092] [--host 127.0.0.1] [--data-dir ./data/cluster]
                        [--zookeeper HOST:PORT[/CHROOT]] [--set KEY=VALUE ...]
    odradek cluster describe [--bootstrap HOST:PORT] [--topic T ...] [--include-internal] [--timeout S]
    odradek cluster reassign --bootstrap HOST:PORT --reassignment-json-file PLAN (--execute [--throttle B/S] |
                             --verify | --cancel) | --list | --generate ...   (tools/reassign.py)

`run` starts a ZooKeeper server of its own on 127.0.0.1:2181 (data in DATA_DIR/zookeeper) unless
--zookeeper names one, then brokers 1..N (`odradek serve`, this Python) on consecutive ports from
--base-port, each with its data in DATA_DIR/broker-<id> and its output in DATA_DIR/broker-<id>.log, and
`zookeeper.connect` = the ZooKeeper address with /odradek as chroot (or the chroot given with
--zookeeper). It waits until Ctrl-C or SIGTERM, then stops the brokers (SIGTERM, all at once, SIGKILL
after 30 s) and then ZooKeeper. A broker that exits meanwhile is reported with the end of its log.

`describe` prints the brokers (the controller marked, their racks, and the size of the logs each holds,
from a DescribeLogDirs request to each) and every partition's leader, replicas and ISR with a status
(under-replicated: ISR smaller than the replicas; offline: no leader), from one DescribeCluster and one
Metadata request through confluent-kafka's AdminClient, and a summary counting under-replicated and
offline partitions. Internal topics
(__consumer_offsets, __transaction_state) are left out unless --include-internal or named with --topic.
It exits 1 when the bootstrap broker cannot be reached within --timeout.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, TextIO

from odradek.cluster.topics import INTERNAL_TOPICS
from odradek.protocol.api_keys import ApiKey
from odradek.tools.common import bootstrap_admin, key_value
from odradek.tools.wire import raw_request

# The line `odradek serve` prints once it listens (odradek.server.READY_MARKER; importing that
# module would load the whole broker).
READY_MARKER = "odradek: accepting connections on "
ZOOKEEPER_PORT = 2181
DEFAULT_CHROOT = "/odradek"
BROKER_START_TIMEOUT_S = 60.0
BROKER_STOP_TIMEOUT_S = 30.0
DESCRIBE_TIMEOUT_S = 10.0


def add_parser(sub: Any) -> None:

    cluster = sub.add_parser("cluster", help="run a local cluster (ZooKeeper and N brokers); describe a cluster")
    actions = cluster.add_subparsers(dest="action", required=True)
    run_p = actions.add_parser("run", help="start ZooKeeper and N brokers here; Ctrl-C stops them")
    run_p.add_argument("--brokers", type=_positive_int, default=3, metavar="N")
    run_p.add_argument("--base-port", type=int, default=9092, metavar="PORT",
                       help="broker 1 listens on PORT, broker 2 on PORT+1, ...")
    run_p.add_argument("--host", default="127.0.0.1", help="the address brokers listen on and advertise")
    run_p.add_argument("--data-dir", type=Path, default=Path("data/cluster"), metavar="DIR")
    run_p.add_argument("--zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
                       help=f"use this ZooKeeper (default: start one on 127.0.0.1:{ZOOKEEPER_PORT}); "
                            f"chroot {DEFAULT_CHROOT} unless one is given")
    run_p.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="a broker property for every broker (repeatable)")
    from odradek.tools.common import connection_options

    describe = actions.add_parser("describe", parents=[connection_options(output=True)],
                                  help="brokers, controller, and each partition's leader, replicas, ISR")
    describe.set_defaults(timeout=DESCRIBE_TIMEOUT_S)
    describe.add_argument("--topic", action="append", default=[], metavar="T", help="only this topic (repeatable)")
    describe.add_argument("--include-internal", action="store_true", help="also list internal topics")
    from odradek.tools import reassign

    reassign.add_arguments(actions.add_parser(
        "reassign", help="move partitions' replicas (Kafka's reassignment JSON plans), with throttles"))


def _positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return int(value)


def run(args: argparse.Namespace) -> int:
    if args.action == "run":
        return cmd_run(args)
    if args.action == "reassign":
        from odradek.tools import reassign

        return reassign.run(args)
    return cmd_describe(args)


# ---------------------------------------------------------------------------------------------------
# describe
# ---------------------------------------------------------------------------------------------------


class ClusterUnreachable(Exception):
    pass


@dataclass(frozen=True)
class PartitionState:
    """One partition as a Metadata response tells it."""

    topic: str
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: str | None = None  # the partition's error code name, if the broker sent one

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def status(self) -> str:
        if self.offline:
            return "offline"
        if self.under_replicated:
            return "under-replicated"
        return self.error or "ok"


@dataclass(frozen=True)
class ClusterView:
    """Brokers, controller and partitions, as one broker's metadata tells them."""

    cluster_id: str | None
    controller_id: int  # -1: none known
    brokers: dict[int, tuple[str, int]]  # id -> advertised (host, port)
    topics: dict[str, dict[int, PartitionState]]
    topic_errors: dict[str, str]  # topics the broker answered with an error (e.g. UNKNOWN_TOPIC_OR_PART)
    racks: dict[int, str | None] = field(default_factory=dict)  # from DescribeCluster, where it answered

    def partition(self, topic: str, partition: int) -> PartitionState:
        return self.topics[topic][partition]

    def partitions(self) -> list[PartitionState]:
        return [self.topics[t][p] for t in sorted(self.topics) for p in sorted(self.topics[t])]


def read_metadata(admin: Any, timeout: float, topics: Iterable[str] = ()) -> ClusterView:
    """A Metadata request for every topic, then one for each of `topics` the first answer lacks (a broker
    may leave internal topics out of "every topic": odradek does); none auto-creates a topic.
    ClusterUnreachable if the cluster does not answer within `timeout`."""
    from confluent_kafka import KafkaException

    try:
        md = admin.list_topics(timeout=timeout)
        answers = [md] + [admin.list_topics(topic=t, timeout=timeout) for t in topics if t not in md.topics]
    except KafkaException as exc:
        raise ClusterUnreachable(str(exc.args[0] if exc.args else exc)) from None
    partitions: dict[str, dict[int, PartitionState]] = {}
    topic_errors: dict[str, str] = {}
    for answer in answers:
        for name, tmd in answer.topics.items():
            if tmd.error is not None and not tmd.partitions:
                topic_errors[name] = tmd.error.name()
                continue
            partitions[name] = {pid: PartitionState(name, pid, p.leader, tuple(p.replicas), tuple(p.isrs),
                                                    p.error.name() if p.error is not None else None)
                                for pid, p in tmd.partitions.items()}
    brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
    return ClusterView(md.cluster_id, md.controller_id, brokers, partitions, topic_errors)


def describe_cluster(bootstrap: str, timeout: float = DESCRIBE_TIMEOUT_S, topics: Iterable[str] = (),
                     config: dict[str, Any] | None = None) -> ClusterView:
    """The cluster's metadata (see read_metadata); brokers and controller from DescribeCluster where the
    broker has it. `config`: more client settings (--command-config)."""
    admin = bootstrap_admin(bootstrap, **(config or {}))  # keep a reference: a destroyed client fails its futures
    view = read_metadata(admin, timeout, topics)
    try:
        described = admin.describe_cluster(request_timeout=timeout).result(timeout)
    except Exception:  # noqa: BLE001 - brokers before Kafka 2.8 lack DescribeCluster: metadata has the same
        return view
    brokers = {n.id: (n.host, n.port) for n in described.nodes}
    controller = described.controller.id if described.controller is not None else -1
    return ClusterView(described.cluster_id or view.cluster_id, controller, brokers, view.topics, view.topic_errors,
                       {n.id: n.rack for n in described.nodes})


@dataclass(frozen=True)
class LogDir:
    """One log directory of a broker, as DescribeLogDirs tells it."""

    path: str
    sizes: dict[tuple[str, int], int]  # partition -> bytes
    total_bytes: int = -1  # -1: the broker does not say (DescribeLogDirs before v4)
    usable_bytes: int = -1

    @property
    def size(self) -> int:
        return sum(self.sizes.values())


def describe_log_dirs(host: str, port: int, timeout: float = DESCRIBE_TIMEOUT_S) -> list[LogDir]:
    """One broker's log directories (DescribeLogDirs v4, every partition), through odradek's codec."""

    response = raw_request(host, port, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}, timeout)
    return [LogDir(r["log_dir"], {(t["name"], p["partition_index"]): p["partition_size"]
                                  for t in r["topics"] for p in t["partitions"]}, r["total_bytes"], r["usable_bytes"])
            for r in response["results"] if not r["error_code"]]


def cmd_describe(args: argparse.Namespace) -> int:
    from rich.table import Table

    from odradek.tools.common import ToolError, client_config

    console = _console()
    try:
        config = client_config(args)
        asked = args.topic or (sorted(INTERNAL_TOPICS) if args.include_internal else [])
        view = describe_cluster(args.bootstrap, args.timeout, asked, config)
    except ToolError as exc:
        print(f"odradek cluster: {exc}", file=sys.stderr)
        return 1
    except ClusterUnreachable as exc:
        print(f"odradek cluster: cannot reach {args.bootstrap} within {args.timeout:g}s: {exc}", file=sys.stderr)
        return 1
    # DescribeLogDirs goes through odradek's own codec, which speaks PLAINTEXT only
    plaintext = str(config.get("security.protocol", "PLAINTEXT")).upper() == "PLAINTEXT"
    log_dirs = {}
    for bid, (host, port) in view.brokers.items():
        try:
            dirs = describe_log_dirs(host, port, args.timeout) if plaintext else None
        except Exception:  # noqa: BLE001 - a broker without DescribeLogDirs, or unreachable: shown as unknown
            dirs = None
        log_dirs[bid] = dirs
    wanted = args.topic or sorted(t for t in view.topics if args.include_internal or t not in INTERNAL_TOPICS)
    shown = [p for p in view.partitions() if p.topic in set(wanted)]
    if args.output == "json":
        from odradek.tools.common import emit

        return emit(args, {
            "cluster_id": view.cluster_id, "controller": view.controller_id if view.controller_id >= 0 else None,
            "brokers": [{"id": bid, "host": view.brokers[bid][0], "port": view.brokers[bid][1],
                         "rack": view.racks.get(bid), "log_size": None if log_dirs[bid] is None else
                         sum(d.size for d in log_dirs[bid]),
                         "log_dirs": None if log_dirs[bid] is None else [d.path for d in log_dirs[bid]]}
                        for bid in sorted(view.brokers)],
            "partitions": [{"topic": p.topic, "partition": p.partition, "leader": p.leader if p.leader >= 0 else None,
                            "replicas": list(p.replicas), "isr": list(p.isr), "status": p.status} for p in shown],
            "missing_topics": {t: view.topic_errors.get(t, "not in the cluster's metadata")
                               for t in wanted if t not in view.topics}}, lambda con: None)
    console.print(f"cluster id [bold]{view.cluster_id or '-'}[/]  controller "
                  f"[bold]{view.controller_id if view.controller_id >= 0 else 'none'}[/]")
    brokers = Table(title="brokers", title_justify="left")
    for column in ("ID", "HOST:PORT", "CONTROLLER", "RACK", "LOG SIZE", "LOG DIR"):
        brokers.add_column(column)
    for bid in sorted(view.brokers):
        host, port = view.brokers[bid]
        dirs = log_dirs[bid]
        size, where = ("-", "-") if dirs is None else (_bytes(sum(d.size for d in dirs)), ",".join(d.path for d in dirs))
        brokers.add_row(str(bid), _address(host, port), "*" if bid == view.controller_id else "",
                        view.racks.get(bid) or "-", size, where)
    console.print(brokers)

    missing = [t for t in wanted if t not in view.topics]
    partitions = Table(title="partitions", title_justify="left")
    for column, justify in (("TOPIC", "left"), ("PARTITION", "right"), ("LEADER", "right"), ("REPLICAS", "left"),
                            ("ISR", "left"), ("STATUS", "left")):
        partitions.add_column(column, justify=justify)  # type: ignore[arg-type]
    styles = {"ok": "green", "under-replicated": "yellow", "offline": "bold red"}
    for p in shown:
        partitions.add_row(p.topic, str(p.partition), str(p.leader) if p.leader >= 0 else "none",
                           _ids(p.replicas), _ids(p.isr), f"[{styles.get(p.status, 'red')}]{p.status}[/]")
    console.print(partitions)
    for topic in missing:
        error = view.topic_errors.get(topic, "not in the cluster's metadata")
        console.print(f"[yellow]topic {topic}: {error}[/]")
    under = sum(1 for p in shown if p.under_replicated and not p.offline)
    offline = sum(1 for p in shown if p.offline)
    console.print(f"{len(shown)} partitions: {under} under-replicated, {offline} offline")
    return 0


def _console() -> Any:
    from rich.console import Console

    # a pipe gets rich's 80 columns, which would squeeze long topic names: give tables room instead
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200
    return Console(width=width, highlight=False)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) or "-"


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# ---------------------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------------------


class LocalBroker:
    """One `odradek serve` child of `odradek cluster run`, in a session of its own (a Ctrl-C in the
    terminal reaches `cluster run` only, which stops the brokers before ZooKeeper).

    A thread copies the child's stdout into its log (stderr goes there directly) and sets `ready` at
    the ready line, so the pipe never fills however much the broker prints.
    """

    def __init__(self, broker_id: int, host: str, port: int, data_dir: Path, log_path: Path,
                 settings: list[tuple[str, str]]) -> None:
        self.broker_id = broker_id
        self.address = _address(host, port)
        self.data_dir = data_dir
        self.log_path = log_path
        self.settings = settings
        self.ready = threading.Event()
        self.proc: subprocess.Popen[str] | None = None
        self.reported_exit = False

    def start(self) -> None:
        cmd = [sys.executable, "-m", "odradek", "serve", "--listen", self.address, "--data-dir", str(self.data_dir)]
        for key, value in self.settings:
            cmd += ["--set", f"{key}={value}"]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "a", buffering=1)
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"--- odradek cluster run: broker {self.broker_id} starting at {started}\n")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True,
                                     env=env, start_new_session=True)
        threading.Thread(target=self._copy_stdout, args=(self.proc.stdout, log), daemon=True,
                         name=f"broker-{self.broker_id}-stdout").start()

    def _copy_stdout(self, stdout: TextIO, log: TextIO) -> None:
        with log:
            for line in stdout:
                log.write(line)
                if line.startswith(READY_MARKER):
                    self.ready.set()

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def _zookeeper_target(value: str | None) -> tuple[str | None, str]:
    """(`host:port` to use or None to start our own, chroot) from --zookeeper."""
    if value is None:
        return None, DEFAULT_CHROOT
    hosts, slash, chroot = value.partition("/")
    return hosts, f"/{chroot.strip('/')}" if slash and chroot.strip("/") else DEFAULT_CHROOT


def cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(highlight=False)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    data_dir = args.data_dir.absolute()
    zk_hosts, chroot = _zookeeper_target(args.zookeeper)
    zk = None
    brokers: list[LocalBroker] = []
    try:
        if zk_hosts is None:
            zk = _start_zookeeper(data_dir / "zookeeper", console)
            if zk is None:
                return 1
            zk_hosts = zk.connect_string
            if stop.is_set():
                return 0
        settings = [("zookeeper.connect", zk_hosts + chroot)] + list(args.set)
        for i in range(args.brokers):
            bid = i + 1
            brokers.append(LocalBroker(bid, args.host, args.base_port + i, data_dir / f"broker-{bid}",
                                       data_dir / f"broker-{bid}.log", [("broker.id", str(bid))] + settings))
        for b in brokers:
            b.start()
        if not _wait_ready(brokers, stop, console):
            return 0 if stop.is_set() else 1
        _print_summary(console, brokers, zk_hosts + chroot, zk)
        return _watch(brokers, zk, stop, console)
    finally:
        _stop_brokers(brokers, console)
        if zk is not None:
            zk.stop()
            console.print("ZooKeeper stopped")
        for s, handler in previous.items():
            signal.signal(s, handler)


def _start_zookeeper(zk_dir: Path, console: Any) -> Any:
    from odradek.tools.zookeeper import ZooKeeperError, ZooKeeperServer

    zk = ZooKeeperServer(zk_dir, host="127.0.0.1", port=ZOOKEEPER_PORT)
    console.print(f"starting ZooKeeper on {zk.connect_string} (data in {zk_dir})")
    try:
        return zk.start()
    except ZooKeeperError as exc:
        print(f"odradek cluster: {exc}\n(--zookeeper HOST:PORT uses a server that is already running)",
              file=sys.stderr)
        return None


def _wait_ready(brokers: list[LocalBroker], stop: threading.Event, console: Any) -> bool:
    """Wait for every broker's ready line; False (after saying why) if one exits, time runs out or we
    are told to stop."""
    deadline = time.monotonic() + BROKER_START_TIMEOUT_S
    waiting = list(brokers)
    while waiting:
        for b in list(waiting):
            if b.ready.is_set():
                console.print(f"broker {b.broker_id} ready on {b.address}")
                waiting.remove(b)
            elif b.exit_code() is not None:
                b.reported_exit = True
                print(f"odradek cluster: broker {b.broker_id} exited with {b.exit_code()} while starting; "
                      f"{b.log_path}:\n{b.log_tail()}", file=sys.stderr)
                return False
        if stop.is_set():
            return False
        if waiting and time.monotonic() >= deadline:
            ids = ", ".join(str(b.broker_id) for b in waiting)
            print(f"odradek cluster: broker(s) {ids} not ready after {BROKER_START_TIMEOUT_S:g}s "
                  f"(logs in {waiting[0].log_path.parent})", file=sys.stderr)
            return False
        stop.wait(0.05)
    return True


def _print_summary(console: Any, brokers: list[LocalBroker], zk_connect: str, zk: Any) -> None:
    from rich.table import Table

    table = Table(title=f"odradek cluster: {len(brokers)} broker(s)", title_justify="left")
    for column in ("BROKER", "ADDRESS", "DATA", "LOG"):
        table.add_column(column)
    for b in brokers:
        table.add_row(str(b.broker_id), b.address, str(b.data_dir), str(b.log_path))
    console.print(table)
    console.print(f"bootstrap  [bold]{','.join(b.address for b in brokers)}[/]")
    zk_log = f" (log {zk.log_path})" if zk is not None else " (not started here)"
    console.print(f"zookeeper  [bold]{zk_connect}[/]{zk_log}")
    console.print("Ctrl-C stops the cluster")


def _watch(brokers: list[LocalBroker], zk: Any, stop: threading.Event, console: Any) -> int:
    """Until told to stop: report brokers (and our ZooKeeper) that exit. 1 once nothing is left running."""
    zk_reported = False
    while not stop.wait(0.5):
        for b in brokers:
            code = b.exit_code()
            if code is not None and not b.reported_exit:
                b.reported_exit = True
                console.print(f"[bold red]broker {b.broker_id} exited with {code}[/]; end of {b.log_path}:")
                console.print(b.log_tail(), markup=False, soft_wrap=True)
        if zk is not None and not zk.is_running() and not zk_reported:
            zk_reported = True
            console.print(f"[bold red]ZooKeeper exited[/]; end of {zk.log_path}:")
            console.print(zk.log_tail(2000), markup=False, soft_wrap=True)
        if all(b.exit_code() is not None for b in brokers):
            console.print("[bold red]every broker has exited[/]")
            return 1
    return 0


def _stop_brokers(brokers: list[LocalBroker], console: Any) -> None:
    """SIGTERM to every broker at once, then wait for them together; SIGKILL what is left after 30 s."""
    running = [b for b in brokers if b.exit_code() is None and b.proc is not None]
    if not running:
        return
    console.print(f"stopping {len(running)} broker(s)")
    for b in running:
        b.terminate()
    deadline = time.monotonic() + BROKER_STOP_TIMEOUT_S
    for b in running:
        assert b.proc is not None
        try:
            b.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            console.print(f"[red]broker {b.broker_id} did not stop within {BROKER_STOP_TIMEOUT_S:g}s: killed[/]")
            b.proc.kill()
            b.proc.wait()
        else:
            console.print(f"broker {b.broker_id} stopped ({b.proc.returncode})")
