"""`make soak`: a three-broker odradek cluster under random faults for a given number of minutes, with an
idempotent producer, a transactional consume-transform-produce loop, a consumer group and the Java client
running throughout; checked for safety at the end and for liveness after every fault.

Usage:  .venv/bin/python bench/soak.py [--minutes 15] [--seed N] [--one-each] [--no-java] [--loopback]
                                       [--kafka [--kafka-minutes M]] [--out-dir bench/results] [--keep]

The engine, its faults, its clients and the derivation of the liveness deadline are tests/faults/nemesis.py's
(the short run of `make test`, tests/faults/test_soak_short.py, uses the same). Network namespaces need root
and iproute2; without them the cluster runs on loopback without the network-partition fault. Prints a summary
table and writes bench/results/soak.md and soak.json; exits 1 when a safety, liveness or broker-log check
failed (the broker and ZooKeeper logs are then kept, and their directory printed).

With --kafka the same seed then runs against Apache Kafka's three-node KRaft cluster (bench/kafka_cluster.py,
`make reference`'s install) with the same clients and checks, for the faults that apply to it (kill -9,
SIGSTOP, SIGTERM: no ZooKeeper, and no network namespaces for its JVMs), and the summary puts its producer
unavailability beside odradek's. Its verdict does not change odradek's exit status.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout, for tests.*
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/, for workloads

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from odradek.tools.common import bootstrap_admin  # noqa: E402
from tests.faults.nemesis import (KIND_TITLES, LIVENESS_DEADLINE_S, SESSION_TIMEOUT_S, SoakCluster, SoakConfig,  # noqa: E402
                                  SoakResult, run_soak)
from workloads import machine, write_results  # noqa: E402

STOP_TIMEOUT_S = 30.0
# A Kafka node restarted after kill -9 recovers its logs and rejoins the quorum before it answers; on this busy
# 2-core machine that took longer than bench/brokers.py's 60 s start timeout.
KAFKA_RESTART_TIMEOUT_S = 180.0


class KafkaSoakCluster(SoakCluster):
    """Apache Kafka's three-node KRaft cluster of bench/kafka_cluster.py (each node a broker and a controller
    quorum voter, on loopback) with the soak's settings, behind SoakCluster's fault primitives. Only the
    faults that apply to it: kill -9, SIGSTOP and SIGTERM of a node (no ZooKeeper; its Metadata names a live
    broker, not the quorum's leader, as controller, so "kill -9 of the controller" would be one of a broker).
    broker.session.timeout.ms is the soak's ZooKeeper session timeout: the same wait before a dead broker's
    partitions move."""

    def __init__(self, work_dir: Path) -> None:
        import brokers
        import kafka_cluster

        peer = brokers.kafka_peer()
        if peer["kafka_error"]:
            raise RuntimeError(f"Apache Kafka cannot run: {peer['kafka_error']}")
        timeout_ms = str(int(SESSION_TIMEOUT_S * 1000))
        settings = {**kafka_cluster.KAFKA_CLUSTER_SETTINGS, "offsets.topic.num.partitions": "6",
                    "broker.session.timeout.ms": timeout_ms, "replica.lag.time.max.ms": timeout_ms}
        self.network = self.zookeeper = self.cluster = None
        self.kafka = kafka_cluster.KafkaCluster(peer["kafka_libs"], settings)
        self.placement = f"loopback: Apache Kafka {peer['kafka_version']}, KRaft, each node broker and voter"

    @property
    def kinds(self) -> tuple[str, ...]:
        return ("kill", "pause", "sigterm")

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def ids(self) -> list[int]:
        return sorted(self.kafka.brokers)

    def admin(self):  # noqa: ANN201
        return bootstrap_admin(self.bootstrap)

    def kill_broker(self, bid: int) -> None:
        self.kafka.brokers[bid].kill()

    def terminate_broker(self, bid: int) -> None:
        broker = self.kafka.brokers[bid]
        broker.signal(signal.SIGTERM)
        try:
            broker.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            broker.kill()

    def start_broker(self, bid: int) -> None:
        broker = self.kafka.brokers[bid]
        broker.spec.start_timeout_s = KAFKA_RESTART_TIMEOUT_S
        broker.restart()

    def signal_broker(self, bid: int, sig: int) -> None:
        self.kafka.brokers[bid].signal(sig)

    def heal_everything(self) -> None:
        for bid, broker in self.kafka.brokers.items():
            if broker.alive():
                broker.signal(signal.SIGCONT)
            elif not broker.log.closed:  # a failed start removed its directory: nothing to start again
                self.start_broker(bid)

    def log_problems(self) -> list[str]:
        return []  # Kafka's own logs are not what this soak judges

    def close(self) -> None:
        for broker in self.kafka.brokers.values():
            broker.signal(signal.SIGCONT)
        self.kafka.stop()


def _s(value: float | None) -> str:
    return "stuck" if value is None else f"{value:.1f}"


def _kafka_cell(kafka: SoakResult | None, kind: str) -> str:
    row = kafka.by_kind().get(kind) if kafka is not None else None
    if row is None:
        return "n/a"
    return f"{_s(row['unavailable_median_s'])} / {_s(row['unavailable_max_s'])} (n={row['faults']})"


def summary_table(result: SoakResult, kafka: SoakResult | None) -> Table:
    table = Table(title=f"soak: {len(result.faults)} faults, seed {result.config.seed}, {result.placement}")
    table.add_column("fault")
    table.add_column("n", justify="right")
    table.add_column("odradek: producer unavailable s (median / max)", justify="right")
    table.add_column("Apache Kafka: the same", justify="right")
    table.add_column("odradek client: progress after the heal s (median / max), longest stall s")
    for kind, row in result.by_kind().items():
        clients = "\n".join(f"{client}: {_s(r['after_heal_median_s'])} / {_s(r['after_heal_max_s'])}, "
                            f"stall {_s(r['stall_max_s'])}" + (f", STUCK {r['stuck']}x" if r["stuck"] else "")
                            for client, r in row["recovery"].items())
        table.add_row(KIND_TITLES[kind], str(row["faults"]),
                      f"{_s(row['unavailable_median_s'])} / {_s(row['unavailable_max_s'])}", _kafka_cell(kafka, kind),
                      clients)
    return table


def markdown(result: SoakResult, kafka: SoakResult | None, kafka_note: str, info: dict) -> str:
    lines = [f"# odradek soak ({result.config.minutes:g} min, seed {result.config.seed})\n",
             f"- date: {info['date']}; machine: {info['nproc']} cores; load average at start {info['loadavg_1m']}",
             f"- cluster: 3 brokers on {result.placement}; Java client: {result.java}",
             f"- liveness deadline after each heal: {LIVENESS_DEADLINE_S:.0f} s (tests/faults/nemesis.py)",
             f"- counts: {result.counts}",
             f"- verdict: {'PASS' if result.ok else 'FAIL'}\n",
             "| fault | n | producer unavailable, s (median / max) | Apache Kafka: the same | client recovery after "
             "the heal, s (median / max; longest stall from the fault) |", "|---|---:|---:|---:|---|"]
    for kind, row in result.by_kind().items():
        clients = "<br>".join(f"{c}: {_s(r['after_heal_median_s'])} / {_s(r['after_heal_max_s'])}; "
                              f"stall {_s(r['stall_max_s'])}" + (f"; STUCK {r['stuck']}x" if r["stuck"] else "")
                              for c, r in row["recovery"].items())
        lines.append(f"| {KIND_TITLES[kind]} | {row['faults']} | {_s(row['unavailable_median_s'])} / "
                     f"{_s(row['unavailable_max_s'])} | {_kafka_cell(kafka, kind)} | {clients} |")
    for name in ("safety", "liveness", "logs"):
        items = getattr(result, name)
        if items:
            lines.append(f"\n## {name} failures\n")
            lines.extend(f"- {item}" for item in items[:50])
    lines.append(f"\nApache Kafka: {kafka_note}")
    if kafka is not None and not kafka.ok:
        lines.append("\nThe Kafka run's own failures (the same checks): " + "; ".join(
            (kafka.safety + kafka.liveness)[:10]))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="minutes of faults (default 15)")
    parser.add_argument("--seed", type=int, help="the random seed of the faults (default: a new one, printed)")
    parser.add_argument("--one-each", action="store_true", help="one fault of each kind instead of --minutes")
    parser.add_argument("--no-java", action="store_true", help="without the Java client")
    parser.add_argument("--loopback", action="store_true", help="on loopback even where namespaces can be made")
    parser.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    parser.add_argument("--keep", action="store_true", help="keep the logs also when the soak passes")
    parser.add_argument("--kafka", action="store_true",
                        help="then the same seed on Apache Kafka's KRaft cluster (kill -9, SIGSTOP, SIGTERM only)")
    parser.add_argument("--kafka-minutes", type=float, help="minutes of the Kafka run (default: --minutes)")
    parser.add_argument("--kafka-only", action="store_true", help="the Kafka run alone (its verdict is the exit status)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    config = SoakConfig(minutes=args.minutes, seed=seed, one_each=args.one_each, java=not args.no_java,
                        netns=False if args.loopback else None)
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    info = machine()
    work_dir = Path(tempfile.mkdtemp(prefix="odradek-soak-"))
    console.print(f"soak: seed {seed}, {args.minutes:g} min, logs in {work_dir}")
    if args.kafka_only:
        kafka = run_soak(config, work_dir / "kafka", make_cluster=KafkaSoakCluster,
                         log=lambda line: console.print(f"kafka: {line}", highlight=False, soft_wrap=True))
        console.print(summary_table(kafka, None))
        console.print("kafka: " + str(kafka), highlight=False, soft_wrap=True)
        write_results(args.out_dir, "soak_kafka", markdown(kafka, None, "this run is Apache Kafka's", info),
                      {"machine": info, "kafka": kafka.as_json()})
        return 0 if kafka.ok else 1
    result = run_soak(config, work_dir, log=lambda line: console.print(line, highlight=False, soft_wrap=True))
    console.print(str(result), highlight=False, soft_wrap=True)
    kafka, kafka_note = None, "not run (bench/soak.py --kafka runs it)"
    if args.kafka:
        kafka_config = SoakConfig(minutes=args.kafka_minutes or args.minutes, seed=seed, one_each=args.one_each,
                                  java=not args.no_java)
        try:
            kafka = run_soak(kafka_config, work_dir / "kafka", make_cluster=KafkaSoakCluster,
                             log=lambda line: console.print(f"kafka: {line}", highlight=False, soft_wrap=True))
            kafka_note = (f"{kafka.placement}, {len(kafka.faults)} faults, same seed and clients; "
                          f"{'clean' if kafka.ok else 'with failures'}; counts {kafka.counts}")
            console.print("kafka: " + str(kafka), highlight=False, soft_wrap=True)
        except Exception as exc:  # noqa: BLE001 - the comparison is n/a with the reason, odradek's verdict stands
            kafka_note = f"n/a: {type(exc).__name__}: {str(exc)[:500]}"
    console.print(summary_table(result, kafka))
    figures = {"machine": info, "soak": result.as_json(), "kafka": kafka.as_json() if kafka else kafka_note}
    write_results(args.out_dir, "soak", markdown(result, kafka, kafka_note, info), figures)
    if result.ok and not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    else:
        console.print(f"logs kept in {work_dir}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
