"""The fault part of `make bench`: how long a partition is unavailable after its leader dies, how far a
producer's throughput dips while every broker is restarted in turn, and how fast a wiped replica catches up.

Usage:  .venv/bin/python bench/faults.py [--quick] [--trials N] [--out-dir DIR]

compare.py runs it after the cluster part (`make bench`; `--only faults` runs it alone there too) and renders
it as a section of its own; run alone, it writes bench/results/faults.md and faults.json.

Everything runs on one three-broker cluster of bench/cluster.py (ZooKeeper session timeout 6 s,
min.insync.replicas=2, replication factor 3), with the clients in this process:

- **Failover after kill -9**: cluster.failover_trial, `--trials` times (10 by default: the percentiles need
  them). A trial's figure is the longest time from the signal on without an acknowledgement of a producer
  paced at 1,000 records/s into a one-partition topic led by the victim.
- **Failover after a network partition**: the same trial with the leader cut off from ZooKeeper and the other
  brokers instead of killed, on a cluster whose brokers and ZooKeeper each run in a network namespace of
  their own (tests/faults/netns.py); the producer, in the root namespace, still reaches every broker. The
  old leader cannot shrink its ISR (ZooKeeper is out of reach), so it acknowledges nothing; the partition
  is served again once its session expired, the controller named a new leader and the producer found it.
  Needs root and iproute2; n/a otherwise.
- **Rolling restart**: an unpaced idempotent acks=all producer (100 B records, 6 partitions) runs while
  each broker in turn gets SIGTERM (controlled shutdown), starts again and rejoins every ISR, the controller
  last. Figures: acknowledgements per second before (the baseline), during the whole restart, and in its
  worst one-second window, and the delivery errors (there should be none).
- **Catch-up of a wiped replica**: a topic of 4 partitions is filled with `CATCH_UP_MB` MB of 1 KiB records;
  a follower of all of them stops, its data directory is deleted, and it starts again. The rate is the
  topic's bytes on that broker once it is back in every ISR, over the time from its start to then.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

import brokers
import cluster as bench_cluster
import compare
from compare import log, short
from workloads import create_topic, machine, write_results

ROLLING_PARTITIONS = 6
ROLLING_BASELINE_S = 5.0
ROLLING_AFTER_S = 3.0
CATCH_UP_PARTITIONS = 4
CATCH_UP_MB = 256
STOP_TIMEOUT_S = 30.0
PARTS = ("kill", "partition", "rolling", "catch_up")


class Settings:
    def __init__(self, quick: bool, trials: int | None = None, parts: set[str] | None = None) -> None:
        self.parts = parts or set(PARTS)
        self.trials = max(1, trials) if trials else (3 if quick else 10)
        self.catch_up_mb = CATCH_UP_MB // 4 if quick else CATCH_UP_MB
        self.budget_s = 300.0 if quick else 720.0


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: with fewer than 100 values, p99 is the highest."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


# --------------------------------------------------------------------------------------------------
# Rolling restart


class AckRate:
    """An idempotent acks=all producer in a thread, as fast as librdkafka takes records (it backs off
    when its queue is full), counting acknowledgements and errors per 100 ms."""

    BUCKET_S = 0.1

    def __init__(self, bootstrap: str, topic: str, partitions: int, max_s: float) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120_000,
                                  "queue.buffering.max.messages": 50_000, "log_level": 3})
        self.topic, self.partitions, self.max_s = topic, partitions, max_s
        self.t0 = time.monotonic()
        self.acks: dict[int, int] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, err, _msg) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        bucket = int((time.monotonic() - self.t0) / self.BUCKET_S)
        self.acks[bucket] = self.acks.get(bucket, 0) + 1

    def _run(self) -> None:
        value, n = bytes(100), 0
        while not self._stop.is_set() and time.monotonic() - self.t0 < self.max_s:
            try:
                self.producer.produce(self.topic, value, partition=n % self.partitions, on_delivery=self._report)
                n += 1
                if n % 1000 == 0:
                    self.producer.poll(0)
            except BufferError:
                self.producer.poll(0.01)

    def rate(self, start: float, end: float) -> float:
        """Acknowledgements per second between two monotonic times (whole buckets)."""
        first, last = int((start - self.t0) / self.BUCKET_S), int((end - self.t0) / self.BUCKET_S)
        if last <= first:
            return 0.0
        return sum(self.acks.get(b, 0) for b in range(first, last)) / ((last - first) * self.BUCKET_S)

    def worst_second(self, start: float, end: float) -> float:
        per = int(round(1.0 / self.BUCKET_S))
        first, last = int((start - self.t0) / self.BUCKET_S), int((end - self.t0) / self.BUCKET_S)
        windows = [sum(self.acks.get(b, 0) for b in range(i, i + per)) for i in range(first, max(first + 1, last - per + 1))]
        return float(min(windows)) if windows else 0.0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(60)


def stop_broker(proc: brokers.BrokerProcess, sig: int = signal.SIGTERM) -> None:
    proc.signal(sig)
    try:
        proc.proc.wait(STOP_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it did not stop in time
        proc.kill()


def rolling_restart(cluster: bench_cluster.Cluster) -> dict:
    topic = f"bench-rolling-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, ROLLING_PARTITIONS)
    controller = cluster.wait_ready()
    order = [bid for bid in sorted(cluster.brokers) if bid != controller] + [controller]
    meter = AckRate(cluster.bootstrap, topic, ROLLING_PARTITIONS, max_s=240.0)
    steps = []
    try:
        time.sleep(ROLLING_BASELINE_S)
        t_start = time.monotonic()
        for bid in order:
            t = time.monotonic()
            stop_broker(cluster.brokers[bid])
            stopped = time.monotonic()
            cluster.brokers[bid].restart()
            cluster.wait_ready()
            cluster.wait_in_sync(topic, ROLLING_PARTITIONS, timeout=60.0)
            steps.append({"broker": bid, "stop_s": stopped - t, "back_in_sync_s": time.monotonic() - stopped})
        t_end = time.monotonic()
        time.sleep(ROLLING_AFTER_S)
    finally:
        meter.stop()
    baseline = meter.rate(meter.t0 + 1.0, t_start)
    during = meter.rate(t_start, t_end)
    worst = meter.worst_second(t_start, t_end)
    return {"topic": topic, "order": order, "steps": steps, "restart_s": t_end - t_start,
            "baseline_per_s": baseline, "during_per_s": during, "worst_second_per_s": worst,
            "during_fraction": during / baseline if baseline else None,
            "worst_fraction": worst / baseline if baseline else None,
            "errors": len(meter.errors), "first_error": meter.errors[0] if meter.errors else None}


# --------------------------------------------------------------------------------------------------
# Catch-up of a wiped replica


def topic_bytes(data_dir: str, topic: str) -> int:
    total = 0
    for name in os.listdir(data_dir):
        head, _, index = name.rpartition("-")
        if head == topic and index.isdigit():
            part = os.path.join(data_dir, name)
            total += sum(os.path.getsize(os.path.join(part, f)) for f in os.listdir(part) if f.endswith(".log"))
    return total


def catch_up(cluster: bench_cluster.Cluster, megabytes: int) -> dict:
    topic = f"bench-catchup-{uuid.uuid4().hex[:6]}"
    controller = cluster.wait_ready()
    victim = next(bid for bid in sorted(cluster.brokers) if bid != controller)
    leaders = [bid for bid in sorted(cluster.brokers) if bid != victim]
    # every partition led by another broker, the victim a follower of each
    cluster.create_topic(topic, CATCH_UP_PARTITIONS,
                         assignment=[[leaders[p % 2], leaders[(p + 1) % 2], victim] for p in range(CATCH_UP_PARTITIONS)])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 262_144, "log_level": 3})
    value, records = os.urandom(1024), megabytes * 1024
    failed: list[str] = []

    def report(err, _msg) -> None:
        if err is not None:
            failed.append(str(err))

    t_fill = time.monotonic()
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=n % CATCH_UP_PARTITIONS, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 5000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left or failed:
        raise RuntimeError(f"filling {topic}: {left} records unsent, {len(failed)} failed ({failed[:1]})")
    cluster.wait_in_sync(topic, CATCH_UP_PARTITIONS, timeout=60.0)
    fill_s = time.monotonic() - t_fill
    proc = cluster.brokers[victim]
    data_dir = os.path.join(proc.tmp, "data")
    stop_broker(proc)
    before = topic_bytes(data_dir, topic)
    shutil.rmtree(data_dir)
    t0 = time.monotonic()
    proc.restart()
    started = time.monotonic() - t0
    cluster.wait_in_sync(topic, CATCH_UP_PARTITIONS, timeout=300.0)
    caught_up_s = time.monotonic() - t0
    after = topic_bytes(data_dir, topic)
    return {"topic": topic, "victim": victim, "records": records, "fill_s": fill_s, "bytes_before": before,
            "bytes_after": after, "start_s": started, "caught_up_s": caught_up_s,
            "mb_per_s": after / caught_up_s / 1e6 if caught_up_s else None}


# --------------------------------------------------------------------------------------------------
# The part


def run(cfg: compare.Config | None, settings: Settings) -> dict:
    """The whole part; nothing raises past one measurement (a failure is its n/a with the reason)."""
    t0 = time.monotonic()
    deadline = t0 + settings.budget_s
    result: dict = {"trials": settings.trials, "settings": dict(bench_cluster.CLUSTER_SETTINGS),
                    "session_timeout_ms": bench_cluster.SESSION_TIMEOUT_MS, "kill": [], "partition": [],
                    "partition_na": None, "rolling": None, "catch_up": None, "error": None,
                    "loadavg_1m_at_start": round(os.getloadavg()[0], 2)}
    try:
        zk = bench_cluster.start_zookeeper()
    except RuntimeError as exc:
        result["error"] = str(exc)
        return result
    try:
        if settings.parts - {"partition"}:
            try:
                cluster = bench_cluster.Cluster(zk, bench_cluster.CLUSTER_SETTINGS)
            except (RuntimeError, OSError) as exc:
                result["error"] = f"cannot start the cluster: {short(exc)}"
                return result
            try:
                run_on_loopback(cluster, settings, deadline, result)
            finally:
                cluster.stop()
        if "partition" in settings.parts:
            log(f"== fault part: network partitions ({time.monotonic() - t0:.0f} s into the part)")
            run_partition_trials(str(zk.data_dir), settings, deadline, result)
    finally:
        bench_cluster.stop_zookeeper(zk)
    result["wall_s"] = time.monotonic() - t0
    return result


def run_on_loopback(cluster: bench_cluster.Cluster, settings: Settings, deadline: float, result: dict) -> None:
    """The kill -9 trials, the rolling restart and the catch-up (those of settings.parts), in that order."""
    if "kill" in settings.parts:
        log(f"== fault part: {settings.trials} × kill -9 of a leader")
        for number in range(settings.trials):
            if time.monotonic() + bench_cluster.SESSION_TIMEOUT_MS / 1000 + 10 > deadline:
                result["kill_stopped_early"] = f"time budget spent after {number} trials"
                break
            try:
                trial = bench_cluster.failover_trial(cluster, "kill", number, cluster.wait_ready())
            except Exception as exc:  # noqa: BLE001 - one failed trial is an n/a entry
                trial = {"how": "kill", "na": short(exc)}
            result["kill"].append(trial)
            log(f"  kill #{number + 1}: " + (trial["na"] if "na" in trial else f"unavailable {trial['unavailable_s']:.2f} s"))
    for name, measure in (("rolling", lambda: rolling_restart(cluster)),
                          ("catch_up", lambda: catch_up(cluster, settings.catch_up_mb))):
        if name not in settings.parts:
            continue
        log(f"== fault part: {name.replace('_', '-')}")
        try:
            result[name] = measure()
        except Exception as exc:  # noqa: BLE001 - the row is n/a with the reason
            result[name] = {"na": short(exc)}
        log(f"  {name}: {result[name]}")


def run_partition_trials(work_dir: str, settings: Settings, deadline: float, result: dict) -> None:
    """`settings.trials` network-partition failovers into result["partition"], on a cluster of its own whose
    ZooKeeper and brokers each run in a network namespace (the fault tests' harness, tests/faults/netns.py)."""
    sys.path.insert(0, os.path.dirname(brokers.BENCH))  # the checkout, for tests.*
    from odradek.tools.zookeeper import ZooKeeperServer
    from tests.cluster.conftest import Cluster
    from tests.faults.netns import Network, netns_unavailable

    why = netns_unavailable()
    if why:
        result["partition_na"] = f"no network namespaces here: {why}"
        return
    base = Path(tempfile.mkdtemp(prefix="bench-netns-", dir=work_dir))
    net = Network.create()
    cluster = zk = None
    try:
        zk_host = net.add_host("zk")
        zk = ZooKeeperServer(base / "zookeeper", host=zk_host.address, port=2181,
                             command_prefix=zk_host.command_prefix).start()
        hosts = {bid: net.add_host(f"b{bid}") for bid in range(1, bench_cluster.BROKERS + 1)}
        cluster = Cluster(base, zk, bench_cluster.BROKERS, settings=bench_cluster.CLUSTER_SETTINGS, hosts=hosts)
        cluster.start()
        cluster.wait_ready()
        for number in range(settings.trials):
            if time.monotonic() + bench_cluster.SESSION_TIMEOUT_MS / 1000 + 15 > deadline:
                result["partition_stopped_early"] = f"time budget spent after {number} trials"
                break
            try:
                trial = partition_trial(cluster, net, hosts, zk_host, number)
            except Exception as exc:  # noqa: BLE001 - one failed trial is an n/a entry
                trial = {"how": "partition", "na": short(exc)}
                net.heal_all()
            result["partition"].append(trial)
            log(f"  partition #{number + 1}: " + (trial["na"] if "na" in trial else
                f"unavailable {trial['unavailable_s']:.2f} s (new leader named after {trial['leader_moved_s']:.2f} s)"))
    except Exception as exc:  # noqa: BLE001 - the row is n/a with the reason
        result["partition_na"] = f"the namespaced cluster failed: {short(exc)}"
    finally:
        net.heal_all()
        if cluster is not None:
            for proc in cluster.brokers.values():
                proc.kill()
        if zk is not None:
            zk.stop()
        net.close()
        shutil.rmtree(base, ignore_errors=True)


def partition_trial(cluster, net, hosts: dict, zk_host, number: int) -> dict:
    """As cluster.failover_trial, with the leader cut off from ZooKeeper and the other brokers (the producer
    in the root namespace still reaches it) instead of killed; healed after, and waited for back in the ISR."""
    controller = cluster.wait_ready().controller_id
    candidates = [bid for bid in cluster.ids if bid != controller]
    victim = candidates[number % len(candidates)]
    others = [bid for bid in cluster.ids if bid != victim]
    topic = f"bench-partition-{number}-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, assignment=[[victim, *others]])
    wait_until(lambda: (s := cluster.partition_state(topic, 0)).leader == victim and len(s.isr) == len(cluster.ids),
               f"{topic} led by broker {victim} with its full ISR")
    rec = bench_cluster.AckRecorder(cluster.bootstrap, topic, bench_cluster.FAILOVER_RATE)
    t_moved = None
    try:
        rec.wait_steady()
        net.isolate(hosts[victim], [zk_host] + [hosts[b] for b in others])
        t_cut = time.monotonic()  # once every route is in: records sent before may still be acknowledged
        cap = time.monotonic() + bench_cluster.SESSION_TIMEOUT_MS / 1000 + 40.0
        while time.monotonic() < cap:
            if t_moved is None:
                try:
                    if cluster.partition_state(topic, 0, broker_id=controller).leader not in (victim, -1):
                        t_moved = time.monotonic()
                except Exception:  # noqa: BLE001 - asked again
                    pass
            if t_moved is not None and rec.acked(t_cut):
                break
            time.sleep(0.02)
        time.sleep(bench_cluster.SETTLE_S)
    finally:
        reports = rec.stop()
        net.heal_all()
    served = any(err is None and s > t_cut for s, _, err in reports)
    pause_s, resumed_s = bench_cluster.longest_pause(reports, t_cut)
    errors = [err for _, _, err in reports if err is not None]
    wait_until(lambda: len(cluster.partition_state(topic, 0).isr) == len(cluster.ids),
               f"broker {victim} back in {topic}'s ISR after the heal", timeout=60.0)
    out = {"how": "partition", "victim": victim, "controller": controller, "topic": topic,
           "leader_moved_s": None if t_moved is None else t_moved - t_cut,
           "unavailable_s": pause_s if served else None, "resumed_s": resumed_s if served else None,
           "acked": len(reports) - len(errors), "failed": len(errors), "first_error": errors[0] if errors else None}
    if not served:
        out["na"] = "no acknowledgement after the cut"
    return out


def wait_until(check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not yet: asked again until the deadline
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.1)


# --------------------------------------------------------------------------------------------------
# Report


def render(result: dict) -> str:
    out: list[str] = ["## Faults: failover, rolling restart, catch-up\n"]
    w = out.append
    if result.get("error"):
        w(f"n/a: {result['error']}\n")
        return "\n".join(out) + "\n"
    notes = compare.Notes()
    w(f"One cluster of three brokers (bench/cluster.py's settings: zookeeper.session.timeout.ms="
      f"{result['session_timeout_ms']}, min.insync.replicas=2, replication factor 3) on this machine's "
      f"{os.cpu_count()} cores with ZooKeeper and the clients; the method is in bench/faults.py. The part took "
      f"{result.get('wall_s', 0) / 60:.1f} min.\n")
    w("| fault | figure |")
    w("|---|---|")
    for how, label in (("kill", "leader killed (kill -9)"), ("partition", "leader cut off by a network partition")):
        trials = result.get(how) or []
        ok = [t["unavailable_s"] for t in trials if t.get("unavailable_s") is not None]
        issues = [f"trial {i}: {t['na']}" for i, t in enumerate(trials, 1) if "na" in t]
        issues += [f"trial {i}: {t['failed']} deliveries failed ({t['first_error']})"
                   for i, t in enumerate(trials, 1) if t.get("failed")]
        if how == "partition" and result.get("partition_na"):
            issues.append(result["partition_na"])
        note = " " + notes.ref(f"{label}: " + "; ".join(issues)) if issues else ""
        if ok:
            cell = (f"p50 {statistics.median(ok):.2f} s, p99 {percentile(ok, 99):.2f} s "
                    f"(lowest {min(ok):.2f} s; {len(ok)} of {len(trials)} trials){note}")
        else:
            cell = "n/a" + note
        w(f"| {label}: the partition unavailable, until the next acknowledgement | {cell} |")
    roll = result.get("rolling")
    if roll and "na" not in roll:
        note = " " + notes.ref(f"rolling restart: {roll['errors']} delivery errors, first: {roll['first_error']}") \
            if roll["errors"] else ""
        w(f"| rolling restart (SIGTERM, restart, back in every ISR; each broker in turn) under an unpaced "
          f"producer, 100 B acks=all | {roll['baseline_per_s']:,.0f} acks/s before; {roll['during_per_s']:,.0f}/s "
          f"({roll['during_fraction']:.0%}) over the {roll['restart_s']:.1f} s restart; worst second "
          f"{roll['worst_second_per_s']:,.0f} ({roll['worst_fraction']:.0%}); {roll['errors']} errors{note} |")
    else:
        w(f"| rolling restart | n/a {notes.ref('rolling restart: ' + (roll or {}).get('na', 'not run'))} |")
    cu = result.get("catch_up")
    if cu and "na" not in cu:
        w(f"| catch-up of a wiped replica ({CATCH_UP_PARTITIONS} partitions of 1 KiB records) | "
          f"{cu['mb_per_s']:,.1f} MB/s: {cu['bytes_after'] / 1e6:,.0f} MB in {cu['caught_up_s']:.1f} s from its start "
          f"({cu['start_s']:.2f} s of it to start) |")
    else:
        w(f"| catch-up of a wiped replica | n/a {notes.ref('catch-up: ' + (cu or {}).get('na', 'not run'))} |")
    w("\nPercentiles are nearest-rank: with fewer than 100 trials p99 is the slowest trial.")
    out.extend(notes.render("Notes (faults)"))
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 trials of each failover, a smaller catch-up")
    parser.add_argument("--trials", type=int, metavar="N", help="failover trials of each kind (default 10)")
    parser.add_argument("--parts", metavar="KEYS", help=f"comma-separated subset of {', '.join(PARTS)}")
    parser.add_argument("--out-dir", default=os.path.join(brokers.BENCH, "results"),
                        help="where faults.md and faults.json go (default bench/results)")
    args = parser.parse_args()
    info = machine()
    parts = {p.strip() for p in args.parts.split(",")} if args.parts else None
    if parts and parts - set(PARTS):
        parser.error(f"--parts: unknown {', '.join(sorted(parts - set(PARTS)))}")
    result = run(None, Settings(args.quick, args.trials, parts))
    report = (f"# odradek fault benchmark{' (--quick)' if args.quick else ''}\n\n- date: {info['date']}\n"
              f"- machine: {info['nproc']} cores, {info['platform']}, Python {info['python']}\n"
              f"- client: confluent-kafka {info['confluent_kafka']} / librdkafka {info['librdkafka']}\n\n" + render(result))
    write_results(args.out_dir, "faults", report, {"machine": info, "quick": args.quick, "faults": result})
    return 0


if __name__ == "__main__":
    sys.modules.setdefault("faults", sys.modules[__name__])
    sys.exit(main())
