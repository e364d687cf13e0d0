"""`odradek groups`: list, describe, delete consumer groups and reset their committed offsets.

Works against any Kafka-compatible broker through confluent-kafka (AdminClient for group APIs, a
throwaway Consumer for watermarks):

    odradek groups list [--bootstrap HOST:PORT]
    odradek groups describe GROUP       members, assignments, committed offsets and lag per partition
    odradek groups delete GROUP
    odradek groups reset-offsets GROUP --topic T (--to-earliest | --to-latest | --to-offset N) [--execute]

`reset-offsets` prints the plan and changes nothing unless `--execute` is given; like Kafka's tool it
requires the group to have no active members (the broker refuses the commit otherwise). Offsets given
with --to-offset are clamped to each partition's [log start, log end].
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

TIMEOUT_S = 15.0


def add_parser(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", default="127.0.0.1:9092", metavar="HOST:PORT")
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups; reset their offsets")
    actions = groups.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[common], help="list consumer groups")
    describe = actions.add_parser("describe", parents=[common], help="members, assignments, offsets and lag")
    describe.add_argument("group")
    delete = actions.add_parser("delete", parents=[common], help="delete an empty group and its offsets")
    delete.add_argument("group")
    reset = actions.add_parser("reset-offsets", parents=[common], help="move a group's committed offsets")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    reset.add_argument("--execute", action="store_true", help="apply the plan (default: dry run)")


def run(args: argparse.Namespace) -> int:
    try:
        return _ACTIONS[args.action](args)
    except GroupToolError as exc:
        print(f"odradek groups: {exc}", file=sys.stderr)
        return 1


class GroupToolError(Exception):
    pass


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def _consumer(bootstrap: str):
    from confluent_kafka import Consumer

    # never subscribes or commits: only metadata and watermark queries
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-groups-tool", "enable.auto.commit": False,
                     "broker.address.family": "v4"})


def _result(future: Any, what: str) -> Any:
    try:
        return future.result(TIMEOUT_S)
    except Exception as exc:  # KafkaException carries the broker's error
        raise GroupToolError(f"{what}: {exc}") from None


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())


def cmd_list(args: argparse.Namespace) -> int:
    admin = _admin(args.bootstrap)  # keep a reference: a destroyed client fails its futures
    listed = _result(admin.list_consumer_groups(request_timeout=TIMEOUT_S), "list groups")
    rows = [[g.group_id, str(g.state).rsplit(".", 1)[-1], "consumer" if g.is_simple_consumer_group is False else "simple"]
            for g in sorted(listed.valid, key=lambda g: g.group_id)]
    _table(rows, ["GROUP", "STATE", "TYPE"])
    return 0


def _committed(admin: Any, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    result = _result(futures[group], f"offsets of {group}")
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def cmd_describe(args: argparse.Namespace) -> int:
    admin = _admin(args.bootstrap)
    desc = _result(admin.describe_consumer_groups([args.group])[args.group], f"describe {args.group}")
    state = str(desc.state).rsplit(".", 1)[-1]
    coordinator = f"{desc.coordinator.host}:{desc.coordinator.port}" if desc.coordinator else "-"
    print(f"group {desc.group_id}  state {state}  assignor {desc.partition_assignor or '-'}  coordinator {coordinator}")
    owner: dict[tuple[str, int], str] = {}
    rows = []
    for m in desc.members:
        parts = sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else []))
        for tp in parts:
            owner[tp] = m.member_id
        rows.append([m.member_id, m.group_instance_id or "-", m.client_id, m.host,
                     ",".join(f"{t}:{p}" for t, p in parts) or "-"])
    print()
    _table(rows, ["MEMBER", "INSTANCE", "CLIENT", "HOST", "ASSIGNMENT"])
    committed = _committed(admin, args.group)
    consumer = _consumer(args.bootstrap)
    rows = []
    try:
        for tp in sorted(set(committed) | set(owner)):
            _, high = consumer.get_watermark_offsets(_tp(*tp), timeout=TIMEOUT_S)
            offset = committed.get(tp)
            lag = "-" if offset is None else str(max(high - offset, 0))
            rows.append([tp[0], str(tp[1]), "-" if offset is None else str(offset), str(high), lag,
                         owner.get(tp, "-")])
    finally:
        consumer.close()
    print()
    _table(rows, ["TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER"])
    return 0


def _tp(topic: str, partition: int, offset: int | None = None):
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition) if offset is None else TopicPartition(topic, partition, offset)


def cmd_delete(args: argparse.Namespace) -> int:
    admin = _admin(args.bootstrap)
    _result(admin.delete_consumer_groups([args.group])[args.group], f"delete {args.group}")
    print(f"deleted group {args.group}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = _admin(args.bootstrap)
    consumer = _consumer(args.bootstrap)
    try:
        topic = consumer.list_topics(args.topic, timeout=TIMEOUT_S).topics.get(args.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise GroupToolError(f"unknown topic {args.topic}")
        committed = _committed(admin, args.group)
        plan = []
        for p in sorted(topic.partitions):
            low, high = consumer.get_watermark_offsets(_tp(args.topic, p), timeout=TIMEOUT_S)
            if args.to_earliest:
                target = low
            elif args.to_latest:
                target = high
            else:
                target = min(max(args.to_offset, low), high)
            plan.append((p, committed.get((args.topic, p)), target))
    finally:
        consumer.close()
    _table([[args.topic, str(p), "-" if old is None else str(old), str(new)] for p, old, new in plan],
           ["TOPIC", "PARTITION", "CURRENT", "NEW"])
    if not args.execute:
        print("dry run: nothing changed (add --execute to apply)")
        return 0
    request = ConsumerGroupTopicPartitions(args.group, [_tp(args.topic, p, new) for p, _, new in plan])
    result = _result(admin.alter_consumer_group_offsets([request])[args.group], f"reset offsets of {args.group}")
    failed = [tp for tp in result.topic_partitions if tp.error is not None]
    if failed:
        raise GroupToolError("; ".join(f"{tp.topic}:{tp.partition}: {tp.error}" for tp in failed))
    print(f"reset {len(plan)} partition(s) of {args.group}")
    return 0


_ACTIONS = {"list": cmd_list, "describe": cmd_describe, "delete": cmd_delete, "reset-offsets": cmd_reset}
