"""Partition reassignment (KIP-455) on real brokers: replicas moving while an idempotent acks=all producer
writes, the leader moving off a removed replica, removed replicas' logs deleted, throttled moves observable
with ListPartitionReassignments and cancellable, errors as Kafka answers them, a controller failover in the
middle of a move, and `odradek cluster reassign` end to end with --throttle and --verify."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from tests.cluster.checker import LoadProducer, check_history, read_partitions
from tests.cluster.common import REPLICATED
from tests.interop.helpers import wait_until
from tests.interop.test_broker_semantics import request

ALTER, LIST, DESCRIBE_LOG_DIRS, INCREMENTAL_ALTER_CONFIGS = 45, 46, 35, 44
NOT_CONTROLLER, UNKNOWN_TOPIC_OR_PARTITION = 41, 3
INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 39, 85
BROKER, TOPIC = 4, 2
SET, DELETE = 0, 1
SETTINGS = {**REPLICATED, "min.insync.replicas": "1", "auto.leader.rebalance.enable": "false"}


# -- helpers -----------------------------------------------------------------------------------------------


def controller_of(cluster) -> int:
    return cluster.wait_ready().controller_id


def alter(cluster, wanted: dict[tuple[str, int], list[int] | None], broker: int | None = None) -> dict:
    """AlterPartitionReassignments v0 to the controller (or to ``broker``)."""
    by_topic: dict[str, list] = {}
    for (topic, index), replicas in wanted.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "replicas": replicas})
    target = controller_of(cluster) if broker is None else broker
    return request(cluster.broker(target).bootstrap, ALTER, 0, {
        "timeout_ms": 30000, "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]})


def alter_errors(cluster, wanted: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], int]:
    response = alter(cluster, wanted)
    assert response["error_code"] == 0, response
    return {(t["name"], p["partition_index"]): p["error_code"] for t in response["responses"] for p in t["partitions"]}


def ongoing(cluster, broker: int | None = None) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    target = controller_of(cluster) if broker is None else broker
    response = request(cluster.broker(target).bootstrap, LIST, 0, {"timeout_ms": 30000, "topics": None})
    assert response["error_code"] == 0, response
    return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
            for t in response["topics"] for p in t["partitions"]}


def log_sizes(cluster, broker: int) -> dict[tuple[str, int], int]:
    response = request(cluster.broker(broker).bootstrap, DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return {(t["name"], p["partition_index"]): p["partition_size"]
            for r in response["results"] for t in r["topics"] for p in t["partitions"]}


def set_configs(cluster, broker: int, resources: list[tuple[int, str, dict[str, str | None]]]) -> None:
    """IncrementalAlterConfigs: SET (a value) or DELETE (None) per resource (type, name)."""
    response = request(cluster.broker(broker).bootstrap, INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False,
        "resources": [{"resource_type": kind, "resource_name": name, "configs": [
            {"name": k, "config_operation": SET if v is not None else DELETE, "value": v} for k, v in configs.items()]}
            for kind, name, configs in resources]})
    assert all(r["error_code"] == 0 for r in response["responses"]), response


def throttle(cluster, topic: str, follower: int, partition: int, rate: int) -> None:
    """Throttle ``follower`` fetching ``topic``-``partition`` to ``rate`` bytes/s."""
    set_configs(cluster, follower, [
        (BROKER, str(follower), {"follower.replication.throttled.rate": str(rate)}),
        (TOPIC, topic, {"follower.replication.throttled.replicas": f"{partition}:{follower}"})])


def unthrottle(cluster, topic: str, broker: int) -> None:
    set_configs(cluster, broker, [(BROKER, str(broker), {"follower.replication.throttled.rate": None}),
                                  (TOPIC, topic, {"follower.replication.throttled.replicas": None})])


def create_placed(cluster, topic: str, assignment: list[list[int]]) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)])[topic].result(30)
    wait_until(lambda: all(len(cluster.partition_state(topic, p).isr) == len(r) for p, r in enumerate(assignment)),
               timeout=30, message=f"{topic}: every partition with a full ISR")


def fill(cluster, topic: str, partition: int, count: int, size: int = 1000) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "broker.address.family": "v4",
                         "linger.ms": 20})
    for i in range(count):
        producer.produce(topic, value=b"%08d" % i + b"x" * (size - 8), partition=partition)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def settled(cluster, topic: str, partition: int, replicas: list[int]) -> bool:
    """Every running broker shows ``replicas`` as the partition's replicas and ISR (in any order), with a
    leader among them."""
    for bid in cluster.running_ids():
        state = cluster.partition_state(topic, partition, bid)
        if list(state.replicas) != replicas or sorted(state.isr) != sorted(replicas) or state.leader not in replicas:
            return False
    return True


# -- tests -------------------------------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_replicas_move_while_an_idempotent_producer_writes(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=SETTINGS).start()
    cluster.wait_ready()
    create_placed(cluster, topic_name, [[1, 2], [1, 2]])
    load = LoadProducer(cluster.bootstrap, topic_name, 2, interval_s=0.003).start()
    try:
        load.wait_acked(300)
        # partition 0 loses its leader (1) and gains 3; partition 1 keeps 1 and gains 3 as preferred leader
        assert alter_errors(cluster, {(topic_name, 0): [2, 3], (topic_name, 1): [3, 1]}) == {
            (topic_name, 0): 0, (topic_name, 1): 0}
        wait_until(lambda: settled(cluster, topic_name, 0, [2, 3]) and settled(cluster, topic_name, 1, [3, 1]),
                   timeout=60, message="both partitions on their new replicas")
        wait_until(lambda: not ongoing(cluster), timeout=30, message="no reassignment in progress")
        acked_before = load.ledger.count()
        load.wait_acked(acked_before + 200)  # writes go on after the move
    finally:
        ledger = load.stop()
    assert cluster.partition_state(topic_name, 0).leader in (2, 3)
    # broker 1 no longer holds partition 0: its log directory is gone; broker 3 holds both
    data = {b: cluster.broker(b).data_dir for b in cluster.ids}
    wait_until(lambda: not (data[1] / f"{topic_name}-0").exists(), timeout=30,
               message="broker 1's log of partition 0 deleted")
    assert (data[3] / f"{topic_name}-0").is_dir() and (data[3] / f"{topic_name}-1").is_dir()
    assert (data[1] / f"{topic_name}-1").is_dir() and not (data[2] / f"{topic_name}-1").exists()
    # the new replicas hold exactly what the others hold (same batches, same bytes)
    wait_until(lambda: log_sizes(cluster, 2)[(topic_name, 0)] == log_sizes(cluster, 3)[(topic_name, 0)] > 0,
               timeout=30, message="brokers 2 and 3 holding the same log of partition 0")
    wait_until(lambda: log_sizes(cluster, 1)[(topic_name, 1)] == log_sizes(cluster, 3)[(topic_name, 1)] > 0,
               timeout=30, message="brokers 1 and 3 holding the same log of partition 1")
    read = read_partitions(cluster.bootstrap, topic_name, 2)
    history = check_history(ledger.snapshot(), read, producer_errors=ledger.errors)
    assert history.ok, str(history)


@pytest.mark.timeout(240)
def test_a_throttled_move_is_listed_and_can_be_cancelled(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=SETTINGS).start()
    controller = controller_of(cluster)
    create_placed(cluster, topic_name, [[1, 2], [2, 1]])
    fill(cluster, topic_name, 0, 3000)  # ~3 MB: at 50 kB/s a move takes a minute
    throttle(cluster, topic_name, 3, 0, 50_000)
    # errors first, as Kafka answers them
    other = next(b for b in cluster.ids if b != controller)
    assert alter(cluster, {(topic_name, 0): [2, 3]}, broker=other)["error_code"] == NOT_CONTROLLER
    assert alter_errors(cluster, {("no-such-topic", 0): [1, 2], (topic_name, 7): [1, 2]}) == {
        ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION, (topic_name, 7): UNKNOWN_TOPIC_OR_PARTITION}
    assert alter_errors(cluster, {(topic_name, 0): [2, 2]}) == {(topic_name, 0): INVALID_REPLICA_ASSIGNMENT}
    assert alter_errors(cluster, {(topic_name, 0): [2, 9]}) == {(topic_name, 0): INVALID_REPLICA_ASSIGNMENT}
    assert alter_errors(cluster, {(topic_name, 0): []}) == {(topic_name, 0): INVALID_REPLICA_ASSIGNMENT}
    assert alter_errors(cluster, {(topic_name, 1): None}) == {(topic_name, 1): NO_REASSIGNMENT_IN_PROGRESS}
    # the throttled move is in progress long enough to be seen
    assert alter_errors(cluster, {(topic_name, 0): [2, 3]}) == {(topic_name, 0): 0}
    assert ongoing(cluster) == {(topic_name, 0): ([2, 3, 1], [3], [1])}
    assert request(cluster.broker(other).bootstrap, LIST, 0, {"timeout_ms": 1000, "topics": None})["error_code"] \
        == NOT_CONTROLLER
    wait_until(lambda: log_sizes(cluster, 3).get((topic_name, 0), 0) > 0, timeout=30,
               message="broker 3 copying partition 0")
    first = log_sizes(cluster, 3)[(topic_name, 0)]
    assert first < log_sizes(cluster, 1)[(topic_name, 0)]
    state = cluster.partition_state(topic_name, 0)
    assert list(state.replicas) == [2, 3, 1] and 3 not in state.isr
    # cancelled: back to brokers 1 and 2 (in the order the reassignment's replica set had them, [2, 1], as
    # Kafka reverts: the original order is not kept), broker 3's copy deleted
    assert alter_errors(cluster, {(topic_name, 0): None}) == {(topic_name, 0): 0}
    assert ongoing(cluster) == {}
    wait_until(lambda: settled(cluster, topic_name, 0, [2, 1]), timeout=30, message="partition 0 back on [2, 1]")
    wait_until(lambda: not (cluster.broker(3).data_dir / f"{topic_name}-0").exists(), timeout=30,
               message="broker 3's partial copy deleted")
    assert alter_errors(cluster, {(topic_name, 0): None}) == {(topic_name, 0): NO_REASSIGNMENT_IN_PROGRESS}
    # throttle off: the same move completes
    unthrottle(cluster, topic_name, 3)
    assert alter_errors(cluster, {(topic_name, 0): [2, 3]}) == {(topic_name, 0): 0}
    wait_until(lambda: settled(cluster, topic_name, 0, [2, 3]) and not ongoing(cluster), timeout=60,
               message="partition 0 moved to [2, 3]")
    assert log_sizes(cluster, 3)[(topic_name, 0)] == log_sizes(cluster, 2)[(topic_name, 0)]


@pytest.mark.timeout(240)
def test_a_new_controller_finishes_a_reassignment_in_progress(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=SETTINGS).start()
    controller = controller_of(cluster)
    a, b = [x for x in cluster.ids if x != controller]
    create_placed(cluster, topic_name, [[a]])
    fill(cluster, topic_name, 0, 2000)
    throttle(cluster, topic_name, b, 0, 20_000)
    assert alter_errors(cluster, {(topic_name, 0): [b]}) == {(topic_name, 0): 0}
    assert ongoing(cluster) == {(topic_name, 0): ([b, a], [b], [a])}
    # the state lives in ZooKeeper: the topic znode carries adding_replicas / removing_replicas
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(10)
    try:
        znode = json.loads(zk.get(f"/brokers/topics/{topic_name}")[0])
        assert znode["partitions"]["0"] == [b, a]
        assert znode["adding_replicas"] == {"0": [b]} and znode["removing_replicas"] == {"0": [a]}
    finally:
        zk.stop()
        zk.close()
    cluster.stop(controller)
    view = cluster.wait_ready()
    assert view.controller_id in (a, b)
    assert ongoing(cluster) == {(topic_name, 0): ([b, a], [b], [a])}  # the new controller knows it
    unthrottle(cluster, topic_name, b)
    wait_until(lambda: settled(cluster, topic_name, 0, [b]) and not ongoing(cluster), timeout=60,
               message=f"partition 0 moved to [{b}] under the new controller")
    wait_until(lambda: not (cluster.broker(a).data_dir / f"{topic_name}-0").exists(), timeout=30,
               message=f"broker {a}'s log of partition 0 deleted")
    read = read_partitions(cluster.bootstrap, topic_name, 1)
    assert [int(v[:8]) for _, v in read[0]] == list(range(2000))


def run_cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", "cluster", "reassign", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.timeout(300)
def test_the_cli_moves_partitions_with_a_throttle_and_verifies(cluster_factory, topic_name, tmp_path: Path):
    cluster = cluster_factory(3, settings=SETTINGS).start()
    cluster.wait_ready()
    create_placed(cluster, topic_name, [[1, 2], [2, 1]])
    fill(cluster, topic_name, 0, 1500)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [3, 2]},
        {"topic": topic_name, "partition": 1, "replicas": [2, 1]}]}))
    boot = cluster.broker(1).bootstrap
    done = run_cli("--bootstrap", boot, "--reassignment-json-file", str(plan), "--execute", "--throttle", "100000")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Current partition replica assignment" in done.stdout and "Successfully started" in done.stdout
    current = json.loads(done.stdout.split("\n\n")[1])
    assert {(p["topic"], p["partition"]): p["replicas"] for p in current["partitions"]} == {
        (topic_name, 0): [1, 2], (topic_name, 1): [2, 1]}
    # the throttle configs as Kafka's tool writes them
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(10)
    try:
        topic_config = json.loads(zk.get(f"/config/topics/{topic_name}")[0])["config"]
        assert topic_config["follower.replication.throttled.replicas"] == "0:3"
        assert topic_config["leader.replication.throttled.replicas"] == "0:1,0:2,1:2,1:1"
        assert json.loads(zk.get("/config/brokers/3")[0])["config"]["follower.replication.throttled.rate"] == "100000"
        listed = run_cli("--bootstrap", boot, "--list")
        assert listed.returncode == 0 and f"{topic_name}-0: replicas [3, 2, 1], adding [3], removing [1]" in listed.stdout
        verify = run_cli("--bootstrap", boot, "--reassignment-json-file", str(plan), "--verify")
        assert verify.returncode == 1 and "still in progress" in verify.stdout, verify.stdout + verify.stderr

        def verified() -> bool:
            result = run_cli("--bootstrap", boot, "--reassignment-json-file", str(plan), "--verify")
            return result.returncode == 0 and "Throttles removed" in result.stdout

        wait_until(verified, timeout=90, interval=1.0, message="--verify to report the plan completed")
        assert settled(cluster, topic_name, 0, [3, 2])
        topic_config = json.loads(zk.get(f"/config/topics/{topic_name}")[0])["config"]
        assert not any("throttled" in k for k in topic_config)
        assert all("follower.replication.throttled.rate" not in json.loads(zk.get(f"/config/brokers/{b}")[0])["config"]
                   for b in cluster.ids if zk.exists(f"/config/brokers/{b}"))
    finally:
        zk.stop()
        zk.close()
    wait_until(lambda: not (cluster.broker(1).data_dir / f"{topic_name}-0").exists(), timeout=30,
               message="broker 1's log of partition 0 deleted")
    # cancelling a plan with nothing in progress reports it and succeeds
    cancel = run_cli("--bootstrap", boot, "--reassignment-json-file", str(plan), "--cancel")
    assert cancel.returncode == 0 and "Cancelled 0 reassignment(s)" in cancel.stdout, cancel.stdout + cancel.stderr
    # --generate proposes a plan over the brokers listed and changes nothing
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic_name}]}))
    generated = run_cli("--bootstrap", boot, "--generate", "--topics-to-move-json-file", str(topics),
                        "--broker-list", "1,3")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    proposal = json.loads(generated.stdout.split("Proposed partition reassignment configuration\n")[1])
    assert sorted(sorted(p["replicas"]) for p in proposal["partitions"]) == [[1, 3], [1, 3]]
    assert settled(cluster, topic_name, 0, [3, 2])
    # a plan naming an unknown partition is refused before anything is sent
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic_name, "partition": 9, "replicas": [1]}]}))
    refused = run_cli("--bootstrap", boot, "--reassignment-json-file", str(bad), "--execute")
    assert refused.returncode == 1 and "unknown partitions" in refused.stderr
