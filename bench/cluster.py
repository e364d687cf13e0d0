"""The cluster part of `make bench`: three odradek brokers (replication factor 3) against one, and failover.

Throughput and latency of the cluster (acks=all) against one odradek node (acks=all) in the same run, and how
long a partition goes unacknowledged when its leader is killed (kill -9) or shut down (SIGTERM: controlled
shutdown).

Usage:  .venv/bin/python bench/cluster.py [--quick] [--rounds N] [--trials N] [--clients N] [--out-dir DIR]

compare.py runs it after its brokers (`make bench`) and renders it as a table of its own; run alone, it
warms the machine up as compare.py does and writes bench/results/cluster.md and cluster.json.

One ZooKeeper server (odradek.tools.zookeeper, Debian's ZooKeeper) serves the whole part; each cluster is
three `odradek serve` processes on disk in a fresh chroot of it (zookeeper.session.timeout.ms=6000,
min.insync.replicas=2). The throughput rows are compare.py's own (run_throughput with its client processes,
fresh topics, the untimed warm-up and medians over rounds), restricted to 8 partitions and acks=all, each
topic read back by a consume row; the cluster's topics have replication factor 3. Round r starts every
configuration afresh, the single node first in odd rounds and the cluster first in even ones. Round 1 also
measures end-to-end latency at 10,000 msgs/s (compare.py's workload) on both, and the failover trials on a
fresh cluster of their own: an idempotent acks=all producer paced at 1,000 records/s into a one-partition
topic whose leader is not the controller; the leader gets SIGKILL or SIGTERM; the trial's figure is the
longest time, from the signal on, without a delivery report, i.e. until the partition acknowledges writes again.
The victim restarts on its port and data before the next trial. Nothing here raises past a workload: a
failure becomes an n/a cell with the reason.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Producer

from odradek.tools.common import key_value  # as `odradek serve --set` reads it

import brokers
import compare
from compare import LATENCY_RATE, SIZES, log, short
from workloads import ClientLog, CpuMeter, create_topic, latency, machine, write_results

BROKERS = 3
PARTITIONS = 8
SESSION_TIMEOUT_MS = 6000  # the ZooKeeper-era Kafka tests' value (Kafka's default was 6000 until 2.5, then 18000)
CLUSTER_SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "default.replication.factor": str(BROKERS),
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": str(BROKERS),
    "offsets.topic.num.partitions": "50",  # Kafka's default and the single node's, stated for create_offsets_topic
}
# `--set KEY=VALUE`: broker properties for both configurations (added to CLUSTER_SETTINGS too)
BOTH_SETTINGS: dict[str, str] = {}
PLAN = [(size, PARTITIONS, "all", True) for size in SIZES]  # (size, partitions, acks, read back): compare.run_throughput
FAILOVER_RATE = 1000  # records/s from the failover producer: a delivery report every ms while the partition is served
READY_TIMEOUT_S = 30.0
SETTLE_S = 0.5  # after the partition is served again, keep producing this long before the trial ends
STEADY_TIMEOUT_S = 15.0  # a trial's producer must be acknowledged steadily within this before the fault
SINGLE, CLUSTER = "single", "cluster"
TITLES = {SINGLE: "odradek single node, acks=all", CLUSTER: f"odradek cluster: {BROKERS} brokers, RF {BROKERS}, acks=all"}


class Settings:
    """The cluster part's own rounds, trials and time budget; records and caps come from compare.Config."""

    def __init__(self, quick: bool, rounds: int | None = None, trials: int | None = None) -> None:
        self.rounds = max(1, rounds) if rounds else (1 if quick else 3)
        self.trials = max(1, trials) if trials else 3
        self.budget_s = 150.0 if quick else 210.0


# --------------------------------------------------------------------------------------------------
# A cluster's view, asked of one broker


def request(port: int, api_key: int, version: int, body: dict, timeout: float = 5.0) -> dict:
    """One request to the broker on 127.0.0.1:`port` on a connection of its own, with odradek's codec: an
    AdminClient would send it to whichever broker it likes. Returns the response body."""
    from odradek.protocol import codec

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(codec.encode_request(api_key, version, 1, "bench-cluster", body))
        head = sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            raise ConnectionError(f"127.0.0.1:{port} closed the connection")
        frame = sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
    return codec.decode_response(api_key, version, frame)[1]


def metadata(port: int, timeout: float = 5.0) -> dict:
    """One broker's own Metadata v1 answer for every topic."""
    return request(port, 3, 1, {"topics": None}, timeout)


def partitions_of(md: dict, topic: str) -> dict[int, dict]:
    return {p["partition_index"]: p for t in md["topics"] if t["name"] == topic and not t["error_code"]
            for p in t["partitions"]}


class Cluster:
    """`BROKERS` odradek brokers (brokers.BrokerProcess each, on disk in the temp dir) in a fresh chroot of
    `zk`, started together; the constructor returns once every broker lists them all and names a running
    controller. It passes for a BrokerProcess where compare.py runs workloads: `bootstrap` lists every broker,
    `pid` is the tuple of their pids (workloads.CpuMeter sums their CPU), alive() and exit_status()."""

    def __init__(self, zk, settings: dict[str, str]) -> None:
        self.zk_connect = f"{zk.connect_string}/bench-{uuid.uuid4().hex[:10]}"
        sets = {"zookeeper.connect": self.zk_connect, **settings}

        def spec(bid: int) -> brokers.BrokerSpec:
            extra = [a for k, v in {"broker.id": str(bid), **sets}.items() for a in ("--set", f"{k}={v}")]
            return brokers.BrokerSpec(f"cluster-{bid}", f"cluster broker {bid}", "",
                                      lambda port, data: brokers.odradek_command(port, data) + extra,
                                      tempfile.gettempdir())

        self.start_all({bid: spec(bid) for bid in range(1, BROKERS + 1)})

    def start_all(self, specs: dict[int, brokers.BrokerSpec]) -> None:
        """Start a broker per spec, all at once (a broker of a quorum waits for the others), then wait until
        the cluster is ready; RuntimeError, with every broker stopped, if one does not start or it is not."""
        self.brokers: dict[int, brokers.BrokerProcess] = {}
        with ThreadPoolExecutor(len(specs)) as pool:
            started = {bid: pool.submit(brokers.BrokerProcess, spec) for bid, spec in specs.items()}
        errors = []
        for bid, future in started.items():
            try:
                self.brokers[bid] = future.result()
            except (RuntimeError, OSError) as exc:
                errors.append(f"broker {bid}: {exc}")
        if errors:
            self.stop()
            raise RuntimeError("; ".join(errors))
        try:
            self.wait_ready()
        except RuntimeError:
            self.stop()
            raise

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    @property
    def pid(self) -> tuple[int, ...]:
        return tuple(b.pid for b in self.brokers.values())

    def alive(self) -> bool:
        return all(b.alive() for b in self.brokers.values())

    def exit_status(self) -> str:
        return ", ".join(f"broker {bid}: {b.exit_status()}" for bid, b in self.brokers.items() if not b.alive())

    def running(self) -> list[int]:
        return [bid for bid, b in self.brokers.items() if b.alive()]

    def wait_for(self, what: str, check, timeout: float = READY_TIMEOUT_S):
        """Poll check({broker id: its metadata}) every 50 ms until it returns something true; RuntimeError
        after `timeout`, with what the brokers said last."""
        deadline = time.monotonic() + timeout
        last: dict = {}
        while True:
            try:
                views = {bid: metadata(self.brokers[bid].port) for bid in self.running()}
                last = {bid: (sorted(b["node_id"] for b in v["brokers"]), v["controller_id"]) for bid, v in views.items()}
                got = check(views)
                if got:
                    return got
            except (OSError, ValueError) as exc:
                last = {"error": short(exc)}
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not within {timeout:.0f} s (brokers, controller per broker: {last})")
            time.sleep(0.05)

    def wait_ready(self) -> int:
        """Wait until every running broker lists every running broker and names a running controller;
        returns the controller's id."""
        def ready(views: dict) -> int | None:
            running = set(self.running())
            controllers = {v["controller_id"] for v in views.values()}
            if len(controllers) == 1 and controllers <= running and all(
                    running <= {b["node_id"] for b in v["brokers"]} for v in views.values()):
                return controllers.pop()
            return None

        return self.wait_for("the cluster to be ready", ready)

    def create_topic(self, topic: str, partitions: int, assignment: list[list[int]] | None = None) -> None:
        """Create `topic` with replication factor BROKERS (or `assignment`) and wait until it is in sync."""
        create_topic(self.bootstrap, topic, partitions, replication=BROKERS, assignment=assignment)
        self.wait_in_sync(topic, len(assignment) if assignment else partitions)

    def create_offsets_topic(self) -> None:
        """Have __consumer_offsets created (a FindCoordinator does that) and wait until it is in sync, so that
        the consume rows' consumers (which have a group.id and look for their coordinator) do not create its
        partitions while they are timed. A single node creates it when it starts."""
        request(self.brokers[self.running()[0]].port, 10, 1, {"key": "bench", "key_type": 0})
        self.wait_in_sync("__consumer_offsets", int(CLUSTER_SETTINGS["offsets.topic.num.partitions"]), timeout=60.0)

    def wait_in_sync(self, topic: str, count: int, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait until every broker says each of the `count` partitions of `topic` has a leader and every
        replica in its ISR."""

        def in_sync(views: dict) -> bool:
            for v in views.values():
                parts = partitions_of(v, topic)
                if len(parts) != count or any(p["leader_id"] < 0 or len(p["isr_nodes"]) < len(p["replica_nodes"])
                                              for p in parts.values()):
                    return False
            return True

        self.wait_for(f"{topic}: every partition led, with its full ISR, on every broker", in_sync, timeout)

    def leader(self, topic: str, partition: int = 0) -> int:
        return partitions_of(metadata(self.brokers[self.running()[0]].port), topic)[partition]["leader_id"]

    def stop(self) -> None:
        """SIGKILL every broker (their data is thrown away; a graceful stop of all three would wait on each
        other's controlled shutdowns), remove their directories, then write back the page cache as
        compare.stop_and_settle does."""
        for b in self.brokers.values():
            if b.alive():
                b.kill()
            b.stop()
        os.sync()
        time.sleep(0.5)


def start_zookeeper():
    """Debian's ZooKeeper (odradek.tools.zookeeper), started in a temp dir of its own for a part of the
    benchmark (stop_zookeeper() removes it); RuntimeError with the reason if it cannot run here or start."""
    from odradek.tools.zookeeper import ZooKeeperServer, zookeeper_unavailable

    why = zookeeper_unavailable()
    if why:
        raise RuntimeError(f"ZooKeeper cannot run here: {why}")
    zk = ZooKeeperServer(tempfile.mkdtemp(prefix="bench-zookeeper-"))
    try:
        zk.start()
    except Exception as exc:  # a ZooKeeperError, or java failing otherwise: the part is n/a, the run goes on
        stop_zookeeper(zk)
        raise RuntimeError(f"ZooKeeper did not start: {short(exc)}") from exc
    return zk


def stop_zookeeper(zk) -> None:
    zk.stop()
    shutil.rmtree(zk.data_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# Failover


class AckRecorder:
    """An idempotent acks=all producer (librdkafka's defaults otherwise, linger.ms=0) in a thread of this
    process, paced at `rate` records/s into partition 0 of `topic`. Each record carries its send time; each
    delivery report is kept as (send time, report time, error or None), all time.monotonic()."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        self.client_log = ClientLog()
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 0, "message.timeout.ms": 60_000, "logger": self.client_log.logger})
        self.producer.list_topics(topic, timeout=10)
        self.topic, self.rate = topic, rate
        self.reports: list[tuple[float, float, str | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, err, msg) -> None:
        sent = struct.unpack_from("<d", msg.value())[0]
        self.reports.append((sent, time.monotonic(), None if err is None else str(err)))

    def _run(self) -> None:
        start, sent = time.monotonic(), 0
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate) + 1
            while sent < due:
                try:
                    self.producer.produce(self.topic, struct.pack("<dq", time.monotonic(), sent) + bytes(84),
                                          partition=0, on_delivery=self._report)
                except BufferError:
                    break
                sent += 1
            self.producer.poll(min(0.001, max(0.0, start + (sent + 1) / self.rate - time.monotonic())))

    def acked(self, after: float) -> bool:
        """True once a record sent after `after` has been acknowledged."""
        return any(err is None and s > after for s, _, err in self.reports[-200:])

    def wait_steady(self, timeout: float = STEADY_TIMEOUT_S) -> None:
        """Wait until the producer has run a second and a record sent in the last half second has been
        acknowledged (a new topic's leader takes a moment to be found and to serve); RuntimeError after
        `timeout`."""
        start = time.monotonic()
        time.sleep(1.0)
        while not self.acked(time.monotonic() - 0.5):
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"the producer got no steady acknowledgements within {timeout:.0f} s")
            time.sleep(0.05)

    def stop(self) -> list[tuple[float, float, str | None]]:
        self._stop.set()
        self._thread.join()
        self.producer.flush(30)
        return list(self.reports)


def longest_pause(reports: list[tuple[float, float, str | None]], t0: float) -> tuple[float, float]:
    """(length, end − t0) of the longest stretch from `t0` on without a successful delivery report."""
    times = [t0] + sorted(acked for _, acked, err in reports if err is None and acked > t0)
    return max(((b - a, b - t0) for a, b in zip(times, times[1:])), default=(0.0, 0.0))


def failover_trial(cluster: Cluster, how: str, number: int, controller: int) -> dict:
    """One trial: a fresh one-partition topic led by a broker that is not the controller (they take turns),
    the paced producer running for a second, then SIGKILL ("kill") or SIGTERM ("term") to that leader. Meanwhile
    the controller is asked for the partition's leader every 5 ms. Ends once the victim has exited, the controller
    names another leader and a record sent after the exit has been acknowledged, plus SETTLE_S; the victim then
    starts again on its port and data and the cluster is waited for."""
    candidates = [bid for bid in sorted(cluster.brokers) if bid != controller]
    victim = candidates[number % len(candidates)]
    others = [bid for bid in sorted(cluster.brokers) if bid != victim]
    topic = f"bench-failover-{how}-{number}-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, 1, assignment=[[victim, *others]])
    if cluster.leader(topic) != victim:
        raise RuntimeError(f"broker {victim} is not {topic}'s leader")
    rec = AckRecorder(cluster.bootstrap, topic, FAILOVER_RATE)
    proc = cluster.brokers[victim]
    try:
        rec.wait_steady()
        cap_s = SESSION_TIMEOUT_MS / 1000 + 30.0
        watch = cluster.brokers[controller].port
        t_signal = time.monotonic()
        proc.signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
        t_exit = t_moved = None
        while time.monotonic() < t_signal + cap_s:
            if t_exit is None and not proc.alive():
                t_exit = time.monotonic()
            if t_moved is None:
                try:
                    if partitions_of(metadata(watch), topic)[0]["leader_id"] not in (victim, -1):
                        t_moved = time.monotonic()
                except (OSError, KeyError, ValueError):
                    pass
            if t_exit is not None and t_moved is not None and rec.acked(t_exit):
                break
            time.sleep(0.005)
        time.sleep(SETTLE_S)
    finally:
        reports = rec.stop()
    served = t_exit is not None and any(err is None and s > t_exit for s, _, err in reports)
    pause_s, resumed_s = longest_pause(reports, t_signal)
    errors = [err for _, _, err in reports if err is not None]
    out = {"how": how, "victim": victim, "controller": controller, "topic": topic,
           "exit_status": proc.exit_status(), "exit_s": None if t_exit is None else t_exit - t_signal,
           "leader_moved_s": None if t_moved is None else t_moved - t_signal,
           "unavailable_s": pause_s if served else None, "resumed_s": resumed_s if served else None,
           "acked": len(reports) - len(errors), "failed": len(errors), "first_error": errors[0] if errors else None,
           "client_log": rec.client_log.summary()}
    if not served:
        out["na"] = (f"broker {victim} did not exit" if t_exit is None else "no acknowledgement after the exit") \
            + f" within {SESSION_TIMEOUT_MS / 1000 + 30.0:.0f} s of the signal"
    try:
        out["new_leader"] = cluster.leader(topic)
    except (OSError, KeyError, ValueError):
        pass
    proc.restart()
    cluster.wait_ready()
    return out


def run_failover(zk, trials: int, deadline: float, result: dict) -> None:
    """`trials` trials of each kind, alternating kill and term, on a fresh cluster, into result["failover"]."""
    fo = result["failover"] = {"kill": [], "term": [], "error": None}
    try:
        cluster = Cluster(zk, CLUSTER_SETTINGS)
    except (RuntimeError, OSError) as exc:
        fo["error"] = f"cannot start the cluster: {short(exc)}"
        return
    try:
        for number in range(trials):
            for how in ("kill", "term"):
                need = SESSION_TIMEOUT_MS / 1000 + 8.0 if how == "kill" else 6.0
                if time.monotonic() + need > deadline:
                    fo["stopped_early"] = (f"the cluster part's time budget had {max(0.0, deadline - time.monotonic()):.0f} s "
                                           f"left, a {how} trial takes ~{need:.0f} s")
                    log(f"  failover: {fo['stopped_early']}")
                    return
                t0 = time.monotonic()
                try:
                    trial = failover_trial(cluster, how, number, cluster.wait_ready())
                except Exception as exc:  # one failed trial is an n/a entry; the next may still run
                    trial = {"how": how, "na": short(exc)}
                trial["trial_s"] = time.monotonic() - t0
                fo[how].append(trial)
                log(f"  failover {how} #{number + 1}: " + (trial["na"] if "na" in trial else
                    f"unavailable {trial['unavailable_s']:.3f} s (victim {trial['victim']} exited after "
                    f"{trial['exit_s']:.3f} s with {trial['exit_status']}, new leader named after "
                    f"{trial['leader_moved_s']:.3f} s), {trial['failed']} failed deliveries"))
                if not cluster.alive():
                    fo["error"] = f"a broker is down after a trial ({cluster.exit_status()})"
                    return
    finally:
        cluster.stop()


# --------------------------------------------------------------------------------------------------
# Throughput and latency turns


def single_node() -> brokers.BrokerProcess:
    extra = [a for k, v in BOTH_SETTINGS.items() for a in ("--set", f"{k}={v}")]
    return brokers.BrokerProcess(brokers.BrokerSpec("cluster-single", TITLES[SINGLE], "",
                                                    lambda port, data: brokers.odradek_command(port, data) + extra,
                                                    tempfile.gettempdir()))


# The latency workload twice: as compare.py runs it (librdkafka's defaults: no idempotence, up to a million
# requests in flight per connection), and with an idempotent producer (at most 5 in flight, as Kafka's Java
# producer by default), which lets librdkafka batch the records that arrive while 5 requests are outstanding.
LATENCY_VARIANTS = {"latency": None, "latency_idempotent": {"enable.idempotence": True}}


def measure_latency(proc, create, cfg: compare.Config, attempt, config: dict | None) -> dict:
    """compare.py's latency workload on a fresh one-partition topic of `proc`, with the brokers' CPU."""
    topic = f"bench-{uuid.uuid4().hex[:6]}-latency"
    made = attempt(lambda: create(topic, 1))
    if made and "na" in made:
        return made
    cpu, t_cpu = CpuMeter(proc.pid), time.perf_counter()
    lat = attempt(lambda: latency(proc.bootstrap, topic, LATENCY_RATE, cfg.latency_s, cfg.warmup_s, config=config))
    broker_cpu_s = cpu.used().get("broker_cpu_s")
    if "na" not in lat and broker_cpu_s is not None:
        lat["broker_cpu_pct"] = broker_cpu_s / (time.perf_counter() - t_cpu) * 100
    if "na" not in lat and lat["send_rate"] < 0.95 * LATENCY_RATE:
        lat["note"] = f"the paced producer only reached {lat['send_rate']:,.0f} msg/s (machine too busy?)"
    return lat


def turn(kind: str, zk, cfg: compare.Config, res: dict, rnd: int, deadline: float) -> None:
    """One configuration's turn in round `rnd`: start it, run the PLAN's throughput rows (and in round 1 the
    latency workloads), stop it. Appends to res["throughput"][row]["rounds"]."""
    t0 = time.monotonic()
    res["loadavg_1m_at_start"].append(round(os.getloadavg()[0], 2))
    skip = {key for key, entry in res["throughput"].items() if rnd > 1 and not compare.has_rate(entry["rounds"][0])}
    try:
        if kind == SINGLE:
            proc = single_node()
        else:
            proc = Cluster(zk, CLUSTER_SETTINGS)
            try:
                proc.create_offsets_topic()
            except Exception:
                proc.stop()
                raise
    except (RuntimeError, OSError) as exc:
        if rnd == 1:
            res["error"] = f"cannot start: {short(exc)}"
        else:
            for key in res["throughput"]:
                res["throughput"][key]["rounds"].append({"na": f"round {rnd}: cannot start: {short(exc)}", "round": rnd})
        return
    create = proc.create_topic if kind == CLUSTER else (lambda topic, n: create_topic(proc.bootstrap, topic, n))
    attempt = compare.guard(proc, deadline)
    try:
        time.sleep(1.0)  # as compare.py's turns
        tp, _ = compare.run_throughput(proc, cfg, attempt, skip, PLAN, create)
        for key, t in tp.items():
            if not t.get("skipped"):
                res["throughput"].setdefault(key, {"rounds": []})["rounds"].append(dict(t, round=rnd))
        res["round_s"].append(time.monotonic() - t0)
        if rnd == 1:
            os.sync()  # as compare.py: latency at 10,000 msgs/s, not the kernel writing back the rows above
            for field, config in LATENCY_VARIANTS.items():
                lat = res[field] = measure_latency(proc, create, cfg, attempt, config)
                log(f"  {field}: " + (lat["na"] if "na" in lat else
                                      f"p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, p99.9 {lat['p999_ms']} ms, "
                                      f"{lat['failed']} failed"))
    finally:
        if not proc.alive():
            res.setdefault("exited", []).append(f"round {rnd}: {proc.exit_status()}")
        if kind == CLUSTER:
            proc.stop()
        else:
            compare.stop_and_settle(proc)


def run(cfg: compare.Config, settings: Settings) -> dict:
    """The cluster part: rounds of both configurations' throughput rows (round 1 with latency), the failover
    trials after round 1. Later rounds start only if they fit in what is left of settings.budget_s."""
    t0 = time.monotonic()
    deadline = t0 + settings.budget_s
    result = {"brokers": BROKERS, "partitions": PARTITIONS, "settings": dict(CLUSTER_SETTINGS),
              "both_settings": dict(BOTH_SETTINGS),
              "failover_rate": FAILOVER_RATE, "budget_s": settings.budget_s, "trials": settings.trials,
              "rounds": {"requested": settings.rounds, "done": 0, "orders": [], "stopped_early": None},
              "configs": {kind: {"title": TITLES[kind], "error": None, "throughput": {}, "latency": None,
                                 "latency_idempotent": None, "loadavg_1m_at_start": [], "round_s": []}
                          for kind in (SINGLE, CLUSTER)},
              "failover": None, "error": None, "loadavg_1m_at_start": round(os.getloadavg()[0], 2)}
    try:
        zk = start_zookeeper()
    except RuntimeError as exc:
        result["error"] = str(exc)
        return result
    result["zookeeper"] = {"connect": zk.connect_string, "tick_time_ms": zk.tick_time_ms}
    configs = result["configs"]
    rounds = result["rounds"]
    try:
        for rnd in range(1, settings.rounds + 1):
            if rnd > 1:
                need = sum(c["round_s"][-1] for c in configs.values() if c["round_s"])
                if time.monotonic() + need > deadline:
                    rounds["stopped_early"] = (f"a round takes ~{need:.0f} s and the cluster part's time budget had "
                                               f"{max(0.0, deadline - time.monotonic()):.0f} s left")
                    log(f"cluster round {rnd} not started: {rounds['stopped_early']}")
                    break
            order = [SINGLE, CLUSTER] if rnd % 2 else [CLUSTER, SINGLE]
            rounds["done"] = rnd
            rounds["orders"].append(order)
            for kind in order:
                if configs[kind]["error"]:
                    continue
                log(f"== cluster part, round {rnd}/{settings.rounds}: {TITLES[kind]} "
                    f"({time.monotonic() - t0:.0f} s into the part)")
                turn(kind, zk, cfg, configs[kind], rnd, deadline)
            if rnd == 1:
                log(f"== cluster part: failover, {settings.trials} × (kill -9, SIGTERM) "
                    f"({time.monotonic() - t0:.0f} s into the part)")
                run_failover(zk, settings.trials, deadline, result)
    finally:
        stop_zookeeper(zk)
    for c in configs.values():
        for entry in c["throughput"].values():
            entry["median"] = compare.median_over_rounds(entry["rounds"])
    result["wall_s"] = time.monotonic() - t0
    return result


# --------------------------------------------------------------------------------------------------
# Report


def render(result: dict) -> str:
    """The cluster part's markdown section (a table and its notes)."""
    out: list[str] = []
    w = out.append
    w("## Cluster: three brokers, replication factor 3, against a single node\n")
    if result.get("error"):
        w(f"n/a: {result['error']}\n")
        return "\n".join(out) + "\n"
    notes = compare.Notes()
    configs = result["configs"]
    rounds = result["rounds"]
    done = rounds["done"]
    settings = ", ".join(f"{k}={v}" for k, v in result["settings"].items())
    both = result.get("both_settings") or {}
    if both:
        settings += " (" + ", ".join(both) + " for the single node as well)"
    w(f"Both on disk (temp dir, default flush policy), started afresh in each round; the cluster's brokers "
      f"share the same {os.cpu_count()} cores with ZooKeeper and the clients. Cluster settings: {settings}; "
      f"topics with replication factor {result['brokers']}. Throughput: compare.py's rows and clients, "
      f"{result['partitions']} partitions, acks=all, each topic read back by its consume row; "
      + (f"median of {done} rounds (lowest–highest in brackets), single node and cluster alternating first"
         if done > 1 else "a single round") + (f" ({rounds['stopped_early']})" if rounds.get("stopped_early") else "")
      + ". Latency: round 1, compare.py's workload (a producer with linger.ms=0, acks=all and librdkafka's "
      "defaults otherwise: no idempotence, up to a million requests in flight on its connection, so each record "
      "is a request of its own while the broker keeps up) on a fresh one-partition topic (replication factor 3 on "
      "the cluster), then the same with enable.idempotence=true (at most 5 requests in flight, so records that "
      "arrive meanwhile share the next request). Failover: see below. "
      f"The part took {result['wall_s'] / 60:.1f} min; load average (1 min) at its start {result['loadavg_1m_at_start']}.\n")
    w(f"| workload | {TITLES[SINGLE]} | {TITLES[CLUSTER]} | cluster ÷ single |")
    w("|---|---:|---:|---:|")

    def err_cell(c: dict) -> str | None:
        return "n/a " + notes.ref(f"{c['title']}: {c['error']}") if c["error"] else None

    def tp_cell(c: dict, key: str) -> tuple[str, float | None]:
        if c["error"]:
            return err_cell(c), None
        entry = c["throughput"].get(key)
        if not entry:
            return "–", None
        m = entry.get("median") or compare.median_over_rounds(entry["rounds"])
        issues = [(f"round {t['round']}: " if done > 1 else "") + text
                  for t in entry["rounds"] if (text := compare.round_issue(t))]
        note = " " + notes.ref(f"{c['title']}, {key}: " + "; ".join(issues)) if issues else ""
        if not m["measured"]:
            return "n/a" + note, None
        spread = f" ({compare.short_rate(m['msgs_per_s_min'])}–{compare.short_rate(m['msgs_per_s_max'])})" \
            if m["measured"] > 1 else ""
        mark = " †" if m["capped"] else ""
        return f"{m['msgs_per_s']:,.0f}/s{spread}, {m['mb_per_s']:,.1f} MB/s{mark}{note}", m["msgs_per_s"]

    tp_ratios = []
    for kind in ("produce", "consume"):
        for size in SIZES:
            key = compare.tp_key(kind, size, PARTITIONS, "all" if kind == "produce" else None)
            (a, va), (b, vb) = tp_cell(configs[SINGLE], key), tp_cell(configs[CLUSTER], key)
            ratio = compare.fmt_ratio(vb, va)
            if va and vb:
                tp_ratios.append((key, vb / va))
            w(f"| {key} | {a} | {b} | {ratio} |")

    def lat_cell(c: dict, fields: tuple[str, ...], which: str = "latency") -> tuple[str, float | None]:
        """The figures `fields` of one latency workload, " / "-joined; the value is the last one's."""
        if c["error"]:
            return err_cell(c), None
        lat = c.get(which)
        if lat is None:
            return "–", None
        if "na" in lat or any(lat.get(f) is None for f in fields):
            why = lat.get("na") or f"no record received ({lat.get('first_error')})"
            return "n/a " + notes.ref(f"{c['title']}, {which}: {why}"), None
        issues = [lat["note"]] if lat.get("note") else []
        if lat.get("failed"):
            issues.append(f"{lat['failed']:,} of {lat['sent']:,} records not delivered (first error: "
                          f"{lat.get('first_error')}); the percentiles are over the {lat['measured']:,} received")
        note = " " + notes.ref(f"{c['title']}, {which}: " + "; ".join(issues)) if issues else ""
        text = " / ".join(f"{lat[f]:.0f}" if f == "broker_cpu_pct" else f"{lat[f]:,.2f}" for f in fields)
        return text + note, lat[fields[-1]]

    def lat_row(label: str, fields: tuple[str, ...], which: str = "latency") -> None:
        (a, va), (b, vb) = lat_cell(configs[SINGLE], fields, which), lat_cell(configs[CLUSTER], fields, which)
        w(f"| {label} | {a} | {b} | {compare.fmt_ratio(vb, va)} |")

    for field, name in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
        lat_row(f"end-to-end latency {name} at {LATENCY_RATE:,} msg/s (ms)", (field,))
    lat_row("brokers' CPU during the latency workload (% of one core, all brokers)", ("broker_cpu_pct",))
    lat_row(f"the same with an idempotent producer (≤ 5 requests in flight): p50 / p99 / p99.9 (ms)",
            ("p50_ms", "p99_ms", "p999_ms"), "latency_idempotent")

    fo = result.get("failover") or {"kill": [], "term": [], "error": "not run"}
    timeout_s = SESSION_TIMEOUT_MS / 1000
    rows = {"kill": ("failover: kill -9 of the partition's leader", "failover: kill -9"),
            "term": ("failover: SIGTERM (controlled shutdown) of the leader", "failover: SIGTERM")}

    def spread(values: list[float], of: int, note: str) -> str:
        if len(values) == 1:
            return f"{values[0]:.2f} (1 trial){note}"
        return f"{statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}; {len(values)} of {of} trials){note}"

    for how in ("kill", "term"):
        trials = fo.get(how) or []
        ok = [t["unavailable_s"] for t in trials if t.get("unavailable_s") is not None]
        moved = [t["leader_moved_s"] for t in trials if t.get("leader_moved_s") is not None]
        issues = []
        for i, t in enumerate(trials, 1):
            if "na" in t:
                issues.append(f"trial {i}: {t['na']}")
            elif t.get("failed"):
                issues.append(f"trial {i}: {t['failed']} deliveries failed, first: {t['first_error']}")
        if fo.get("error"):
            issues.append(fo["error"])
        if not trials:
            issues.append(fo.get("stopped_early") or "not run")
        note = " " + notes.ref(f"failover {how}: " + "; ".join(issues)) if issues else ""
        w(f"| {rows[how][0]} → next acknowledgement (s) | – | {spread(ok, len(trials), note) if ok else 'n/a' + note} | – |")
        w(f"| {rows[how][1]} → the controller's Metadata names a new leader (s) | – | "
          f"{spread(moved, len(trials), '') if moved else 'n/a' + note} | – |")
    w("")
    w(f"Failover: on a fresh cluster, {result['trials']} trials of each kind, alternating; zookeeper.session.timeout.ms="
      f"{SESSION_TIMEOUT_MS}. An idempotent acks=all producer (linger.ms=0, librdkafka's defaults otherwise) sends "
      f"{result['failover_rate']:,} records/s to a one-partition topic (replication factor 3, created for the trial "
      "with a broker other than the controller as its leader); once it has run a second and is being acknowledged, that leader gets the "
      "signal. A trial's figure is the longest time from the signal on without a delivery report (median, lowest "
      "and highest trial); the row below it, from the signal until the controller's own Metadata answer (asked every "
      "5 ms) names another leader: the brokers' part, without the client's. The victim restarts on its port and "
      "data before the next trial.")
    targets = []
    if tp_ratios:
        worst = min(tp_ratios, key=lambda kr: kr[1])
        targets.append(f"cluster produce and consume throughput ≥ 0.50× the single node: "
                       f"{'met' if worst[1] >= 0.5 else 'not met'} (lowest {worst[1]:.2f}×, {worst[0]})")
    if any(t.get("unavailable_s") is not None for t in fo.get("term") or []):
        worst = max(t["unavailable_s"] for t in fo["term"] if t.get("unavailable_s") is not None)
        targets.append(f"unavailability after a controlled shutdown ≤ 1 s: {'met' if worst <= 1.0 else 'not met'} "
                       f"(highest trial {worst:.2f} s)")
    if any(t.get("unavailable_s") is not None for t in fo.get("kill") or []):
        worst = max(t["unavailable_s"] for t in fo["kill"] if t.get("unavailable_s") is not None)
        targets.append(f"after kill -9 ≤ session timeout + 2 s = {timeout_s + 2:.0f} s: "
                       f"{'met' if worst <= timeout_s + 2 else 'not met'} (highest trial {worst:.2f} s)")
    if targets:
        w("\nTargets (issue): " + "; ".join(targets) + ".")
    cpu = []
    for kind in (SINGLE, CLUSTER):
        parts = []
        for key, entry in configs[kind]["throughput"].items():
            m = entry.get("median") or compare.median_over_rounds(entry["rounds"])
            if m.get("broker_cpu_per_m") is not None:
                parts.append(f"{key.split(',')[0]} {m['broker_cpu_per_m']:.2f}")
        if parts:
            cpu.append(f"{'the single node' if kind == SINGLE else 'the three brokers together'}: {', '.join(parts)}")
    if cpu:
        w("\nBrokers' CPU seconds per million records (median of the rounds): " + "; ".join(cpu) + ".")
    w("\n† a round hit the time cap (its rate is over what was done in time).")
    out.extend(notes.render("Notes (cluster)"))
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="compare.py's --quick records and caps, 1 round")
    parser.add_argument("--rounds", type=int, metavar="N", help="throughput rounds (default 3; 1 with --quick)")
    parser.add_argument("--trials", type=int, metavar="N", help="failover trials of each kind (default 3)")
    parser.add_argument("--clients", type=int, metavar="N", default=compare.DEFAULT_CLIENTS,
                        help=f"client processes per throughput row (default {compare.DEFAULT_CLIENTS})")
    parser.add_argument("--out-dir", default=os.path.join(brokers.BENCH, "results"),
                        help="where cluster.md and cluster.json go (default bench/results)")
    parser.add_argument("--set", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                        help="a broker property for the single node and every cluster broker (repeatable)")
    args = parser.parse_args()
    for key, value in args.set:
        BOTH_SETTINGS[key] = CLUSTER_SETTINGS[key] = value
    cfg = compare.Config(args.quick, clients=args.clients)
    settings = Settings(args.quick, args.rounds, args.trials)
    info = machine()
    cfg.pool = compare.ClientPool(cfg.clients)
    try:
        compare.warm_up(cfg)
        result = run(cfg, settings)
    finally:
        cfg.pool.close()
    report = (f"# odradek cluster benchmark{' (--quick)' if args.quick else ''}\n\n- date: {info['date']}; load "
              f"average (1 min) at start {info['loadavg_1m']}\n- machine: {info['nproc']} cores, {info['platform']}, "
              f"Python {info['python']}\n- client: confluent-kafka {info['confluent_kafka']} / librdkafka "
              f"{info['librdkafka']}; {cfg.clients} client processes per throughput row\n\n" + render(result))
    write_results(args.out_dir, "cluster", report,
                  {"machine": info, "quick": args.quick, "clients": cfg.clients, "cluster": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
