"""What replication costs Apache Kafka itself on this machine: bench/cluster.py's throughput rows for Kafka.

Usage:  .venv/bin/python bench/kafka_cluster.py [--rounds N] [--clients N] [--quick] [--no-odradek]

Issue 14 asks odradek's three-broker cluster (replication factor 3, acks=all) for at least half the
throughput of one odradek node (acks=all) on this 2-core machine. This script asks the same of Apache Kafka
(the version of reference/pom.xml, `make reference`): one KRaft broker against three KRaft brokers (each
broker and controller in one JVM, a three-voter quorum), with bench/cluster.py's settings (replication
factor 3, min.insync.replicas=2, 50 `__consumer_offsets` partitions created and in sync before the rows),
the same rows (compare.run_throughput: produce 100 B and 1 KiB into 8 partitions with acks=all, each read
back) and the same client processes. Unless `--no-odradek`, each round also runs bench/cluster.py's own pair
(odradek single node and odradek cluster on ZooKeeper), so both ratios come from the same run. Round r
runs the four configurations in turn, reversed in even rounds; the tables show medians over rounds.

The JVMs are started as bench/brokers.py starts Kafka's column of `make bench` (heap, G1 options), three
at once for the cluster; a configuration that cannot start is reported and the run goes on.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import brokers
import cluster
import compare
from compare import log, short
from workloads import create_topic, machine, write_results

KAFKA_SINGLE, KAFKA_CLUSTER = "kafka-single", "kafka-cluster"
ODRADEK_SINGLE, ODRADEK_CLUSTER = "odradek-single", "odradek-cluster"
PAIRS = ((KAFKA_SINGLE, KAFKA_CLUSTER), (ODRADEK_SINGLE, ODRADEK_CLUSTER))
# bench/cluster.py's cluster settings, in Kafka's names (KRaft has no ZooKeeper session)
KAFKA_CLUSTER_SETTINGS = {
    "default.replication.factor": str(cluster.BROKERS),
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": str(cluster.BROKERS),
    "offsets.topic.num.partitions": "50",
    "transaction.state.log.replication.factor": str(cluster.BROKERS),
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": str(cluster.BROKERS),
    "share.coordinator.state.topic.min.isr": "2",
}


class KafkaCluster(cluster.Cluster):
    """`cluster.BROKERS` Apache Kafka processes in KRaft mode, each a broker and a voter of the controller
    quorum, started together (a broker answers only once a quorum has formed). It passes where
    bench/cluster.py's Cluster does: bootstrap, pid, alive(), create_topic(), create_offsets_topic(), stop()."""

    def __init__(self, libs: str, settings: dict[str, str] | None = None) -> None:
        ref = brokers.reference_kafka()
        settings = KAFKA_CLUSTER_SETTINGS if settings is None else settings
        cluster_id = ref.random_cluster_id()
        ids = range(1, cluster.BROKERS + 1)
        controller_ports = {bid: brokers.free_port() for bid in ids}
        voters = ",".join(f"{bid}@127.0.0.1:{port}" for bid, port in controller_ports.items())

        def spec(bid: int) -> brokers.BrokerSpec:
            def command(port: int, data_dir: str) -> list[str]:
                kafka = ref.KafkaReference(
                    Path(libs), port=port, work_dir=Path(data_dir), heap=brokers.KAFKA_HEAP,
                    jvm_options=brokers.KAFKA_JVM_OPTIONS, cluster_id=cluster_id, controller_port=controller_ports[bid],
                    settings={"node.id": str(bid), "controller.quorum.voters": voters, **settings})
                return kafka.prepare(brokers.KAFKA_START_TIMEOUT_S)

            return brokers.BrokerSpec(f"kafka-cluster-{bid}", f"Kafka cluster broker {bid}", "", command,
                                      tempfile.gettempdir(), start_timeout_s=brokers.KAFKA_START_TIMEOUT_S)

        self.start_all({bid: spec(bid) for bid in ids})

    def wait_ready(self) -> None:
        """Wait until every broker lists every broker. (A KRaft broker names some live broker as the controller
        in Metadata, not the quorum's leader, so unlike odradek's brokers they need not agree on one.)"""

        def every_broker_listed(views: dict) -> bool:
            running = set(self.running())
            return all({b["node_id"] for b in v["brokers"]} >= running for v in views.values())

        self.wait_for("the Kafka cluster to be ready", every_broker_listed)


def start(kind: str, zk, libs: str | None):
    """A started configuration of `kind`, with the function that creates its topics."""
    if kind in (KAFKA_SINGLE, ODRADEK_SINGLE):
        if kind == KAFKA_SINGLE:  # `make bench`'s Kafka column
            proc = brokers.BrokerProcess(next(s for s in brokers.specs({"kafka_libs": libs}) if s.key == "kafka"))
        else:
            proc = cluster.single_node()
        return proc, lambda topic, n: create_topic(proc.bootstrap, topic, n)
    proc = KafkaCluster(libs) if kind == KAFKA_CLUSTER else cluster.Cluster(zk, cluster.CLUSTER_SETTINGS)
    try:
        proc.create_offsets_topic()
    except Exception:
        proc.stop()
        raise
    return proc, proc.create_topic


def turn(kind: str, zk, libs: str | None, cfg: compare.Config, res: dict, rnd: int, deadline: float) -> None:
    """Start `kind`, run bench/cluster.py's PLAN of throughput rows on it, stop it."""
    try:
        proc, create = start(kind, zk, libs)
    except (RuntimeError, OSError) as exc:
        res.setdefault("errors", []).append(f"round {rnd}: cannot start: {short(exc)}")
        return
    try:
        time.sleep(1.0)
        tp, _ = compare.run_throughput(proc, cfg, compare.guard(proc, deadline), set(), cluster.PLAN, create)
        for key, t in tp.items():
            res["throughput"].setdefault(key, {"rounds": []})["rounds"].append(dict(t, round=rnd))
    finally:
        if kind in (KAFKA_CLUSTER, ODRADEK_CLUSTER):
            proc.stop()
        else:
            compare.stop_and_settle(proc)


def run(cfg: compare.Config, rounds: int, with_odradek: bool) -> dict:
    peer = brokers.kafka_peer()
    result = {"kafka_version": peer["kafka_version"], "rounds": rounds, "error": None,
              "configs": {kind: {"throughput": {}} for pair in PAIRS for kind in pair}}
    if peer["kafka_error"]:
        result["error"] = f"Apache Kafka cannot run: {peer['kafka_error']}"
        return result
    kinds = [KAFKA_SINGLE, KAFKA_CLUSTER] + ([ODRADEK_SINGLE, ODRADEK_CLUSTER] if with_odradek else [])
    zk = None
    if with_odradek:
        try:
            zk = cluster.start_zookeeper()
        except RuntimeError as exc:
            result["error"] = str(exc)
            return result
    deadline = time.monotonic() + 3600.0
    try:
        for rnd in range(1, rounds + 1):
            for kind in (kinds if rnd % 2 else kinds[::-1]):
                log(f"== round {rnd}/{rounds}: {kind}")
                turn(kind, zk, peer["kafka_libs"], cfg, result["configs"][kind], rnd, deadline)
    finally:
        if zk is not None:
            cluster.stop_zookeeper(zk)
    for c in result["configs"].values():
        for entry in c["throughput"].values():
            entry["median"] = compare.median_over_rounds(entry["rounds"])
    return result


def render(result: dict) -> str:
    if result["error"]:
        return f"n/a: {result['error']}\n"
    lines = [f"| row | broker | single node, msg/s | cluster of {cluster.BROKERS}, RF {cluster.BROKERS}, msg/s "
             "| cluster ÷ single (median) | each round | brokers' CPU s per million records, single / cluster |",
             "|---|---|---:|---:|---:|---|---:|"]
    titles = {KAFKA_SINGLE: f"Apache Kafka {result['kafka_version']}", ODRADEK_SINGLE: "odradek"}
    for single, many in PAIRS:
        one, three = result["configs"][single]["throughput"], result["configs"][many]["throughput"]
        for key in dict.fromkeys([*one, *three]):
            a = one.get(key, {}).get("median", {})
            b = three.get(key, {}).get("median", {})
            ratio = f"{b['msgs_per_s'] / a['msgs_per_s']:.2f}×" if a.get("msgs_per_s") and b.get("msgs_per_s") else "n/a"
            each = [f"{x['msgs_per_s'] / y['msgs_per_s']:.2f}" for x, y in
                    zip(three.get(key, {}).get("rounds", []), one.get(key, {}).get("rounds", []))
                    if compare.has_rate(x) and compare.has_rate(y)]
            cpu = " / ".join(f"{m['broker_cpu_per_m']:.2f}" if m.get("broker_cpu_per_m") is not None else "n/a"
                             for m in (a, b))
            lines.append(f"| {key} | {titles[single]} | {_cell(a)} | {_cell(b)} | {ratio} | {', '.join(each)} "
                         f"| {cpu} |")
    errors = [f"{kind}: {e}" for kind, c in result["configs"].items() for e in c.get("errors", [])]
    return "\n".join(lines) + "\n" + "".join(f"\n- {e}" for e in errors) + "\n"


def _cell(median: dict) -> str:
    return f"{median['msgs_per_s']:,.0f}" if median.get("msgs_per_s") else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="compare.py's --quick records and caps")
    parser.add_argument("--rounds", type=int, default=2, metavar="N", help="rounds (default 2)")
    parser.add_argument("--clients", type=int, metavar="N", default=compare.DEFAULT_CLIENTS,
                        help=f"client processes per row (default {compare.DEFAULT_CLIENTS})")
    parser.add_argument("--no-odradek", action="store_true", help="Apache Kafka's pair only")
    parser.add_argument("--out-dir", default=os.path.join(brokers.BENCH, "results"),
                        help="where kafka_cluster.md and .json go (default bench/results)")
    args = parser.parse_args()
    cfg = compare.Config(args.quick, clients=args.clients)
    info = machine()
    cfg.pool = compare.ClientPool(cfg.clients)
    try:
        compare.warm_up(cfg)
        result = run(cfg, max(1, args.rounds), not args.no_odradek)
    finally:
        cfg.pool.close()
    report = (f"# Replication's cost, Apache Kafka and odradek\n\n- date: {info['date']}; load average (1 min) at "
              f"start {info['loadavg_1m']}\n- machine: {info['nproc']} cores, {info['platform']}\n- client: "
              f"confluent-kafka {info['confluent_kafka']} / librdkafka {info['librdkafka']}; {cfg.clients} client "
              f"processes per row\n\n" + render(result))
    write_results(args.out_dir, "kafka_cluster", report, {"machine": info, "clients": cfg.clients, "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
