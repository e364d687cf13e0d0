"""`odradek cluster reassign`: move partitions' replicas between brokers, as Kafka's
kafka-reassign-partitions.sh does, against any Kafka-compatible cluster (KIP-455 APIs).

    odradek cluster reassign --bootstrap HOST:PORT --reassignment-json-file plan.json --execute [--throttle B/S]
    odradek cluster reassign --bootstrap HOST:PORT --reassignment-json-file plan.json --verify
    odradek cluster reassign --bootstrap HOST:PORT --reassignment-json-file plan.json --cancel
    odradek cluster reassign --bootstrap HOST:PORT --list
    odradek cluster reassign --bootstrap HOST:PORT --generate --topics-to-move-json-file topics.json
                             --broker-list 1,2,3

The plan is Kafka's JSON: `{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}`
(`log_dirs`, if present, must be "any": replicas do not move between directories).

- `--execute` prints the current assignment (a plan to go back with) and sends AlterPartitionReassignments
  to the controller. With `--throttle`, first the brokers of the moving partitions get the dynamic configs
  `leader.replication.throttled.rate` and `follower.replication.throttled.rate`, and their topics
  `leader.replication.throttled.replicas` (the current replicas) and `follower.replication.throttled.replicas`
  (the new ones), as Kafka's tool sets them (IncrementalAlterConfigs).
- `--verify` tells, per partition, whether its reassignment is done, in progress or failed (its replicas are
  not the plan's); once every one is done it removes the throttles. Exit code 0 when all are done, 1 otherwise.
- `--cancel` cancels the plan's reassignments (they go back to their original replicas) and removes the
  throttles.
- `--generate` proposes a plan that spreads the topics' partitions over the brokers listed (rack-aware when
  every one has a rack), printing the current assignment and the proposal; it changes nothing.

Metadata and configs go through confluent-kafka's AdminClient; the KIP-455 requests, which it lacks, are sent
with odradek's own codec over a plain socket to the controller Metadata names.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.tools.common import bootstrap_admin
from odradek.tools.wire import raw_request

TIMEOUT_S = 30.0
RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
NOT_CONTROLLER = 41

TopicPartition = tuple[str, int]


class ReassignError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", metavar="HOST:PORT")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", action="store_true", help="start the plan's reassignments")
    action.add_argument("--verify", action="store_true", help="tell how far they are; remove throttles when done")
    action.add_argument("--cancel", action="store_true", help="cancel the plan's reassignments")
    action.add_argument("--list", action="store_true", help="list the reassignments in progress")
    action.add_argument("--generate", action="store_true", help="propose a plan for --topics-to-move-json-file")
    parser.add_argument("--reassignment-json-file", type=Path, metavar="FILE", help="the plan (Kafka's JSON)")
    parser.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE",
                        help='{"version": 1, "topics": [{"topic": "t"}]} (--generate)')
    parser.add_argument("--broker-list", default=None, metavar="1,2,3", help="brokers to spread over (--generate)")
    parser.add_argument("--throttle", type=int, default=None, metavar="BYTES_PER_SEC",
                        help="replication throttle for the moving partitions while they move (--execute)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, metavar="S")


# ---------------------------------------------------------------------------------------------------
# plan files
# ---------------------------------------------------------------------------------------------------


def read_plan(path: Path) -> dict[TopicPartition, list[int]]:
    """The partitions and target replicas of a plan file; ReassignError if it is not Kafka's format."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ReassignError(f"cannot read {path}: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("partitions"), list):
        raise ReassignError(f'{path}: expected {{"version": 1, "partitions": [...]}}')
    plan: dict[TopicPartition, list[int]] = {}
    for entry in value["partitions"]:
        try:
            tp = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise ReassignError(f"{path}: bad entry {entry!r}") from None
        if any(d != "any" for d in entry.get("log_dirs", [])):
            raise ReassignError(f"{path}: {tp[0]}-{tp[1]}: only \"any\" log directories are supported")
        if tp in plan:
            raise ReassignError(f"{path}: {tp[0]}-{tp[1]} appears twice")
        if not replicas or len(set(replicas)) != len(replicas):
            raise ReassignError(f"{path}: {tp[0]}-{tp[1]}: the replicas {replicas} must be distinct and not empty")
        plan[tp] = replicas
    if not plan:
        raise ReassignError(f"{path}: the plan names no partition")
    return plan


def plan_json(assignment: dict[TopicPartition, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]})


# ---------------------------------------------------------------------------------------------------
# requests
# ---------------------------------------------------------------------------------------------------


class Cluster:
    """What the tool asks of the cluster: metadata and configs through confluent-kafka, the KIP-455
    requests to the controller."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        self.admin = bootstrap_admin(bootstrap)
        self.timeout = timeout

    def metadata(self) -> Any:
        from confluent_kafka import KafkaException

        try:
            return self.admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise ReassignError(f"cannot reach the cluster: {exc.args[0] if exc.args else exc}") from None

    def assignment(self, partitions: list[TopicPartition]) -> dict[TopicPartition, list[int]]:
        md = self.metadata()
        out = {}
        for topic, index in partitions:
            tmd = md.topics.get(topic)
            if tmd is not None and index in tmd.partitions:
                out[(topic, index)] = list(tmd.partitions[index].replicas)
        return out

    def _to_controller(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        # the controller may move between the Metadata and the request: ask again a few times
        deadline = time.monotonic() + self.timeout
        for _ in range(10):
            md = self.metadata()
            broker = md.brokers.get(md.controller_id)
            if broker is not None:
                try:
                    response = raw_request(broker.host, broker.port, api_key, version, body, self.timeout)
                except OSError as exc:
                    response = {"error_code": -1, "error_message": str(exc)}
                if response["error_code"] not in (NOT_CONTROLLER, -1):
                    return response
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        raise ReassignError("no controller answered")

    def alter(self, wanted: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, tuple[int, str | None]]:
        by_topic: dict[str, list] = {}
        for (topic, index), replicas in sorted(wanted.items()):
            by_topic.setdefault(topic, []).append({"partition_index": index, "replicas": replicas})
        response = self._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
            "timeout_ms": int(self.timeout * 1000),
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]})
        if response["error_code"]:
            raise ReassignError(f"the controller refused: error {response['error_code']} "
                                f"{response.get('error_message') or ''}".rstrip())
        return {(t["name"], p["partition_index"]): (p["error_code"], p["error_message"])
                for t in response["responses"] for p in t["partitions"]}

    def ongoing(self) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        response = self._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": int(self.timeout * 1000),
                                                                         "topics": None})
        if response["error_code"]:
            raise ReassignError(f"ListPartitionReassignments failed: error {response['error_code']}")
        return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
                for t in response["topics"] for p in t["partitions"]}

    def alter_configs(self, resources: list[Any]) -> None:
        from confluent_kafka.admin import ResourceType

        # librdkafka sends a broker's configs to that broker: one broker resource per call
        brokers = [r for r in resources if r.restype == ResourceType.BROKER]
        others = [r for r in resources if r.restype != ResourceType.BROKER]
        for batch in [[r] for r in brokers] + ([others] if others else []):
            futures = self.admin.incremental_alter_configs(batch, request_timeout=self.timeout)
            for resource, future in futures.items():
                try:
                    future.result(self.timeout)
                except Exception as exc:  # noqa: BLE001 - reported per resource
                    raise ReassignError(f"changing the configs of {resource} failed: {exc}") from None


# ---------------------------------------------------------------------------------------------------
# throttles
# ---------------------------------------------------------------------------------------------------


def set_throttles(cluster: Cluster, current: dict[TopicPartition, list[int]], plan: dict[TopicPartition, list[int]],
                  rate: int) -> None:
    """As Kafka's tool: the rates on every broker involved, the current replicas as leader-throttled and the
    new ones as follower-throttled, per topic."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, index), target in sorted(plan.items()):
        old = current.get((topic, index), [])
        brokers.update(old + target)
        leaders.setdefault(topic, []).extend(f"{index}:{b}" for b in old)
        followers.setdefault(topic, []).extend(f"{index}:{b}" for b in target if b not in old)
    resources = [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
        ConfigEntry(name, str(rate), incremental_operation=AlterConfigOpType.SET) for name in RATE_CONFIGS])
        for b in sorted(brokers)]
    for topic in sorted(leaders):
        values = {REPLICA_CONFIGS[0]: ",".join(leaders[topic]), REPLICA_CONFIGS[1]: ",".join(followers[topic])}
        resources.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in values.items() if value]))
    cluster.alter_configs(resources)


def remove_throttles(cluster: Cluster, topics: set[str]) -> None:
    """The throttle configs off every broker and off ``topics`` (as Kafka's tool, after --verify)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    md = cluster.metadata()
    resources = [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
        ConfigEntry(name, "", incremental_operation=AlterConfigOpType.DELETE) for name in RATE_CONFIGS])
        for b in sorted(md.brokers)]
    resources += [ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
        ConfigEntry(name, "", incremental_operation=AlterConfigOpType.DELETE) for name in REPLICA_CONFIGS])
        for t in sorted(topics) if t in md.topics]
    cluster.alter_configs(resources)


# ---------------------------------------------------------------------------------------------------
# actions
# ---------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    try:
        cluster = Cluster(args.bootstrap, args.timeout)
        if args.list:
            return cmd_list(cluster)
        if args.generate:
            return cmd_generate(cluster, args)
        if args.reassignment_json_file is None:
            raise ReassignError("--reassignment-json-file is required")
        plan = read_plan(args.reassignment_json_file)
        if args.execute:
            return cmd_execute(cluster, plan, args.throttle)
        if args.verify:
            return cmd_verify(cluster, plan)
        return cmd_cancel(cluster, plan)
    except ReassignError as exc:
        print(f"odradek cluster reassign: {exc}", file=sys.stderr)
        return 1


def cmd_execute(cluster: Cluster, plan: dict[TopicPartition, list[int]], throttle: int | None) -> int:
    current = cluster.assignment(list(plan))
    missing = sorted(set(plan) - set(current))
    if missing:
        raise ReassignError("unknown partitions: " + ", ".join(f"{t}-{p}" for t, p in missing))
    print("Current partition replica assignment (save it to go back):\n")
    print(plan_json(current) + "\n")
    if throttle is not None:
        if throttle < 1:
            raise ReassignError("--throttle must be at least 1 byte/s")
        set_throttles(cluster, current, plan, throttle)
        print(f"Throttle set to {throttle} B/s on brokers of the moving partitions.")
    failed = 0
    for (topic, index), (code, message) in sorted(cluster.alter(dict(plan)).items()):
        if code:
            failed += 1
            print(f"Reassignment of {topic}-{index} refused: error {code} {message or ''}".rstrip())
    if failed:
        return 1
    print(f"Successfully started the reassignment of {len(plan)} partition(s).")
    return 0


def cmd_verify(cluster: Cluster, plan: dict[TopicPartition, list[int]]) -> int:
    ongoing = cluster.ongoing()
    current = cluster.assignment(list(plan))
    done = True
    for tp, target in sorted(plan.items()):
        if tp in ongoing:
            done = False
            print(f"Reassignment of partition {tp[0]}-{tp[1]} is still in progress.")
        elif current.get(tp) == target:
            print(f"Reassignment of partition {tp[0]}-{tp[1]} is completed.")
        else:
            done = False
            print(f"Reassignment of partition {tp[0]}-{tp[1]} failed: its replicas are {current.get(tp)}, "
                  f"not {target}.")
    if done:
        remove_throttles(cluster, {t for t, _ in plan})
        print("Throttles removed.")
        return 0
    return 1


def cmd_cancel(cluster: Cluster, plan: dict[TopicPartition, list[int]]) -> int:
    outcomes = cluster.alter({tp: None for tp in plan})
    cancelled = [tp for tp, (code, _) in outcomes.items() if code == 0]
    for tp, (code, message) in sorted(outcomes.items()):
        if code:
            print(f"Cancelling {tp[0]}-{tp[1]}: error {code} {message or ''}".rstrip())
    print(f"Cancelled {len(cancelled)} reassignment(s).")
    remove_throttles(cluster, {t for t, _ in plan})
    return 0


def cmd_list(cluster: Cluster) -> int:
    ongoing = cluster.ongoing()
    for (topic, index), (replicas, adding, removing) in sorted(ongoing.items()):
        print(f"{topic}-{index}: replicas {replicas}, adding {adding}, removing {removing}")
    print(f"{len(ongoing)} reassignment(s) in progress.")
    return 0


def cmd_generate(cluster: Cluster, args: argparse.Namespace) -> int:
    from odradek.cluster.admin import AdminError, place_replicas

    if args.topics_to_move_json_file is None or not args.broker_list:
        raise ReassignError("--generate needs --topics-to-move-json-file and --broker-list")
    try:
        topics = [str(t["topic"]) for t in json.loads(args.topics_to_move_json_file.read_text())["topics"]]
        brokers = [int(b) for b in args.broker_list.split(",")]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReassignError(f"cannot read the topics or brokers: {exc}") from None
    md = cluster.metadata()
    racks: dict[int, str | None] = {b: None for b in brokers}
    try:
        for node in cluster.admin.describe_cluster(request_timeout=cluster.timeout).result(cluster.timeout).nodes:
            if node.id in racks:
                racks[node.id] = node.rack
    except Exception:  # noqa: BLE001 - no DescribeCluster: rack-unaware
        pass
    current: dict[TopicPartition, list[int]] = {}
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        tmd = md.topics.get(topic)
        if tmd is None or not tmd.partitions:
            raise ReassignError(f"unknown topic {topic}")
        parts = {p: list(tmd.partitions[p].replicas) for p in sorted(tmd.partitions)}
        current.update({(topic, p): r for p, r in parts.items()})
        try:
            placed = place_replicas(racks, len(parts), len(next(iter(parts.values()))))
        except AdminError as exc:
            raise ReassignError(exc.message) from None
        proposed.update({(topic, p): placed[i] for i, p in enumerate(parts)})
    print("Current partition replica assignment\n" + plan_json(current) + "\n")
    print("Proposed partition reassignment configuration\n" + plan_json(proposed))
    return 0
