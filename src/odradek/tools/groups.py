"""`odradek groups`: list, describe, delete consumer groups and reset their committed offsets.

Works against any Kafka-compatible broker through confluent-kafka (AdminClient for group APIs, a
throwaway Consumer for watermarks):

    odradek groups list [--bootstrap HOST:PORT]
    odradek groups describe GROUP       members, assignments, committed offsets and lag per partition
    odradek groups delete GROUP
    odradek groups reset-offsets GROUP --topic T (--to-earliest | --to-latest | --to-offset N) [--execute]

Each takes --bootstrap, --command-config (client properties for librdkafka: a secured or remote cluster)
and --timeout; list and describe take --output json. An execution over many partitions shows a progress
bar on a terminal.

`reset-offsets` prints the plan and changes nothing unless `--execute` is given; like Kafka's tool it
requires the group to have no active members (the broker refuses the commit otherwise). Offsets given
with --to-offset are clamped to each partition's [log start, log end].
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.tools.common import ToolError, admin_client, connection_options, emit, progress, run_command, table, \
    topic_partitions

# partitions committed per AlterConsumerGroupOffsets request when a progress bar shows (one request otherwise)
RESET_BATCH = 100
PROGRESS_FROM = 2 * RESET_BATCH


def add_parser(sub: Any) -> None:
    common = connection_options()
    shown = connection_options(output=True)
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups; reset their offsets")
    actions = groups.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[shown], help="list consumer groups")
    describe = actions.add_parser("describe", parents=[shown], help="members, assignments, offsets and lag")
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
    return run_command("groups", lambda: _ACTIONS[args.action](args))


def _result(future: Any, what: str, args: argparse.Namespace) -> Any:
    from odradek.tools.common import result

    return result(future, what, args.timeout)


def _print_table(header: list[str], rows: list[list[Any]]) -> None:
    from odradek.tools.common import console

    console().print(table(header, rows))


def cmd_list(args: argparse.Namespace) -> int:
    from odradek.tools.common import metadata

    admin = admin_client(args)  # keep a reference: a destroyed client fails its futures
    metadata(admin, args)  # an unreachable cluster: a clear error within --timeout
    listed = _result(admin.list_consumer_groups(request_timeout=args.timeout), "list groups", args)
    data = [{"group": g.group_id, "state": str(g.state).rsplit(".", 1)[-1],
             "type": "consumer" if g.is_simple_consumer_group is False else "simple"}
            for g in sorted(listed.valid, key=lambda g: g.group_id)]
    return emit(args, data, lambda con: con.print(table(["GROUP", "STATE", "TYPE"],
                                                        [list(d.values()) for d in data])))


def _committed(admin: Any, args: argparse.Namespace, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=args.timeout)
    result = _result(futures[group], f"offsets of {group}", args)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def cmd_describe(args: argparse.Namespace) -> int:
    from odradek.tools.topics import topic_offsets

    admin = admin_client(args)
    desc = _result(admin.describe_consumer_groups([args.group], request_timeout=args.timeout)[args.group],
                   f"describe {args.group}", args)
    owner: dict[tuple[str, int], str] = {}
    members = []
    for m in desc.members:
        parts = sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else []))
        for tp in parts:
            owner[tp] = m.member_id
        members.append({"member": m.member_id, "instance": m.group_instance_id, "client": m.client_id,
                        "host": m.host, "assignment": [f"{t}:{p}" for t, p in parts]})
    committed = _committed(admin, args, args.group)
    wanted = sorted(set(committed) | set(owner))
    ends: dict[tuple[str, int], int] = {}
    for topic in sorted({t for t, _ in wanted}):
        ends.update({(topic, p): high for p, (_, high) in
                     topic_offsets(admin, args, topic, [p for t, p in wanted if t == topic]).items()})
    offsets = [{"topic": t, "partition": p, "committed": committed.get((t, p)), "log_end_offset": ends[(t, p)],
                "lag": None if (t, p) not in committed else max(ends[(t, p)] - committed[(t, p)], 0),
                "member": owner.get((t, p))} for t, p in wanted]
    data = {"group": desc.group_id, "state": str(desc.state).rsplit(".", 1)[-1],
            "assignor": desc.partition_assignor or None,
            "coordinator": f"{desc.coordinator.host}:{desc.coordinator.port}" if desc.coordinator else None,
            "members": members, "offsets": offsets}

    def render(con: Any) -> None:
        con.print(f"group {data['group']}  state {data['state']}  assignor {data['assignor'] or '-'}  "
                  f"coordinator {data['coordinator'] or '-'}\n", soft_wrap=True)
        con.print(table(["MEMBER", "INSTANCE", "CLIENT", "HOST", "ASSIGNMENT"],
                        [[m["member"], m["instance"], m["client"], m["host"], ",".join(m["assignment"]) or "-"]
                         for m in members]))
        con.print()
        con.print(table(["TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER"],
                        [list(o.values()) for o in offsets], right=("PARTITION", "COMMITTED", "LOG-END", "LAG")))
    return emit(args, data, render)


def _tp(topic: str, partition: int, offset: int | None = None):
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition) if offset is None else TopicPartition(topic, partition, offset)


def cmd_delete(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    _result(admin.delete_consumer_groups([args.group], request_timeout=args.timeout)[args.group],
            f"delete {args.group}", args)
    print(f"deleted group {args.group}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions

    from odradek.tools.topics import topic_offsets

    admin = admin_client(args)
    partitions = topic_partitions(admin, args, args.topic)
    committed = _committed(admin, args, args.group)
    plan = []
    for p, (low, high) in sorted(topic_offsets(admin, args, args.topic, partitions).items()):
        if args.to_earliest:
            target = low
        elif args.to_latest:
            target = high
        else:
            target = min(max(args.to_offset, low), high)
        plan.append((p, committed.get((args.topic, p)), target))
    _print_table(["TOPIC", "PARTITION", "CURRENT", "NEW"], [[args.topic, p, old, new] for p, old, new in plan])
    if not args.execute:
        print("dry run: nothing changed (add --execute to apply)")
        return 0
    show = len(plan) >= PROGRESS_FROM and sys.stderr.isatty()
    # one request for the lot, unless a progress bar shows: then batches, so that it moves
    batch = RESET_BATCH if show else max(len(plan), 1)
    with progress(len(plan), f"resetting {args.group}", show) as bar:
        for i in range(0, len(plan), batch):
            chunk = plan[i:i + batch]
            request = ConsumerGroupTopicPartitions(args.group, [_tp(args.topic, p, new) for p, _, new in chunk])
            done = _result(admin.alter_consumer_group_offsets([request], request_timeout=args.timeout)[args.group],
                           f"reset offsets of {args.group}", args)
            failed = [tp for tp in done.topic_partitions if tp.error is not None]
            if failed:
                raise ToolError("; ".join(f"{tp.topic}:{tp.partition}: {tp.error}" for tp in failed))
            bar.advance(bar.task, len(chunk))
    print(f"reset {len(plan)} partition(s) of {args.group}")
    return 0


_ACTIONS = {"list": cmd_list, "describe": cmd_describe, "delete": cmd_delete, "reset-offsets": cmd_reset}
