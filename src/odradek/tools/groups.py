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

Share groups (KIP-932) are listed too, with type `share`, and `describe` shows their members and, per
partition, the share-partition start offset and the lag (records not finished yet), as Kafka's
kafka-share-groups.sh does. confluent-kafka has no share-group calls, so those requests go through the tools'
own client (tools/wire.py, tools/share_groups.py), which speaks PLAINTEXT, SSL and SASL PLAIN/SCRAM; with
another SASL mechanism share groups are left out of `list`, with a note on stderr. `delete` deletes a share
group (without members) with its delivery state.

`reset-offsets` prints the plan and changes nothing unless `--execute` is given; like Kafka's tool it
requires the group to have no active members (the broker refuses the commit otherwise). Offsets given
with --to-offset are clamped to each partition's [log start, log end].
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from odradek.tools.common import ToolError, admin_client, client_config, connection_options, emit, list_offsets, \
    progress, result, run_command, table, topic_partitions

# partitions committed per AlterConsumerGroupOffsets request when a progress bar shows (one request otherwise)
RESET_BATCH = 100
PROGRESS_FROM = 2 * RESET_BATCH


def add_parser(sub: Any) -> None:
    common = connection_options()
    shown = connection_options(output=True)
    groups = sub.add_parser("groups", help="list, describe, delete consumer and share groups; reset offsets")
    actions = groups.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[shown], help="list consumer and share groups")
    describe = actions.add_parser("describe", parents=[shown], help="members, assignments, offsets and lag")
    describe.add_argument("group")
    delete = actions.add_parser("delete", parents=[common],
                                help="delete an empty group and its offsets (a share group: its delivery state)")
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


def _print_table(header: list[str], rows: list[list[Any]]) -> None:
    from odradek.tools.common import console

    console().print(table(header, rows))


def cmd_list(args: argparse.Namespace) -> int:
    from odradek.tools.common import metadata

    admin = admin_client(args)  # keep a reference: a destroyed client fails its futures
    md = metadata(admin, args)  # an unreachable cluster: a clear error within --timeout
    listed = result(admin.list_consumer_groups(request_timeout=args.timeout), "list groups", args.timeout)
    found = {g.group_id: {"group": g.group_id, "state": str(g.state).rsplit(".", 1)[-1],
                          "type": "consumer" if g.is_simple_consumer_group is False else "simple"}
             for g in listed.valid}
    found.update({row["group"]: row for row in _share_groups(args, md)})
    data = [found[group] for group in sorted(found)]
    return emit(args, data, lambda con: con.print(table(["GROUP", "STATE", "TYPE"],
                                                        [list(d.values()) for d in data])))


def committed_offsets(admin: Any, group: str, timeout: float) -> dict[tuple[str, int], int]:
    """The group's committed offsets, (topic, partition) -> offset; partitions without one are left out."""
    return committed_offsets_of(admin, [group], timeout)[group]


def committed_offsets_of(admin: Any, groups: list[str], timeout: float) -> dict[str, dict[tuple[str, int], int]]:
    """`committed_offsets` of many groups: librdkafka takes one group per request, so every request is sent
    before the first answer is awaited, and the groups' coordinators answer at the same time."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    pending = {group: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                        request_timeout=timeout)[group] for group in groups}
    found = {}
    for group, future in pending.items():
        offsets = result(future, f"offsets of {group}", timeout)
        found[group] = {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions if tp.offset >= 0}
    return found


@dataclass
class GroupState:
    """A consumer group as `groups describe` and the console show it: the description, each member's
    assignment, the committed offsets and the log end offsets of every partition that has either."""

    description: Any  # confluent_kafka's ConsumerGroupDescription
    assignments: dict[str, list[tuple[str, int]]]  # member id -> its partitions, sorted
    committed: dict[tuple[str, int], int]
    ends: dict[tuple[str, int], int]  # -1 where unknown

    @property
    def owner(self) -> dict[tuple[str, int], str]:
        return {tp: member for member, parts in self.assignments.items() for tp in parts}

    @property
    def partitions(self) -> list[tuple[str, int]]:
        return sorted(set(self.committed) | set(self.owner))

    def lag(self, tp: tuple[str, int]) -> int | None:
        """Records between the committed offset and the log end; None without a commit or a known end."""
        committed, end = self.committed.get(tp), self.ends.get(tp, -1)
        return None if committed is None or end < 0 else max(end - committed, 0)


def group_state(admin: Any, group: str, timeout: float) -> GroupState:
    """Describe `group` and read its offsets (ToolError if the group cannot be described)."""
    desc = result(admin.describe_consumer_groups([group], request_timeout=timeout)[group], f"describe {group}",
                  timeout)
    assignments = {m.member_id: sorted((tp.topic, tp.partition)
                                       for tp in (m.assignment.topic_partitions if m.assignment else []))
                   for m in desc.members}
    committed = committed_offsets(admin, group, timeout)
    state = GroupState(desc, assignments, committed, {})
    state.ends = list_offsets(admin, state.partitions, timeout)
    return state


def _share_groups(args: argparse.Namespace, md: Any) -> list[dict[str, str]]:
    """The rows of `list` for the share groups of every broker of `md`; none, with a note on stderr, when the
    connection settings need what the tools' own client lacks."""
    from odradek.tools.share_groups import SHARE_TYPE, list_share_groups
    from odradek.tools.wire import Unsupported

    brokers = sorted((b.host, b.port) for b in md.brokers.values())
    try:
        listed = list_share_groups(brokers, client_config(args), args.timeout)
    except Unsupported as exc:
        print(f"odradek groups: share groups not listed: {exc}", file=sys.stderr)
        return []
    return [{"group": group, "state": state, "type": SHARE_TYPE} for group, state in listed.items()]


def _share_description(args: argparse.Namespace) -> tuple[Any, Exception | None]:
    """(the ShareGroupState of args.group, None) if it is a share group, (None, None) if it is not, and
    (None, the reason) when the tools' own client cannot tell with these connection settings."""
    from odradek.tools.share_groups import describe_share_group
    from odradek.tools.wire import Unsupported

    config = client_config(args)
    try:
        return describe_share_group(config["bootstrap.servers"], config, args.group, args.timeout), None
    except Unsupported as exc:
        return None, exc


def cmd_describe(args: argparse.Namespace) -> int:
    # asked first: a share group is what ShareGroupDescribe knows, the others it answers "not found"
    share, unsupported = _share_description(args)
    if share is not None:
        return _describe_share(args, share)
    state = group_state(admin_client(args), args.group, args.timeout)
    desc = state.description
    if unsupported is not None and not desc.members:
        # a share group looks like a dead classic group to the consumer-group APIs: say why it may be one
        print(f"odradek groups: {args.group} may be a share group, which cannot be described here: {unsupported}",
              file=sys.stderr)
    members = [{"member": m.member_id, "instance": m.group_instance_id, "client": m.client_id, "host": m.host,
                "assignment": [f"{t}:{p}" for t, p in state.assignments[m.member_id]]} for m in desc.members]
    owner = state.owner
    offsets = [{"topic": t, "partition": p, "committed": state.committed.get((t, p)),
                "log_end_offset": state.ends[(t, p)] if state.ends[(t, p)] >= 0 else None,
                "lag": state.lag((t, p)), "member": owner.get((t, p))} for t, p in state.partitions]
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


def _describe_share(args: argparse.Namespace, share: Any) -> int:
    """`describe` of a share group: its members, and per partition the start offset and the lag."""
    from odradek.tools.share_groups import SHARE_TYPE

    members = [{"member": m.member_id, "client": m.client_id, "host": m.host, "member_epoch": m.member_epoch,
                "subscribed": m.subscribed, "assignment": [f"{t}:{p}" for t, p in m.assignment]}
               for m in share.members]
    offsets = [{"topic": t, "partition": p, "start_offset": part.start_offset, "lag": part.lag,
                "error": part.error} for (t, p), part in share.partitions.items()]
    data = {"group": share.group, "type": SHARE_TYPE, "state": share.state, "assignor": share.assignor,
            "coordinator": share.coordinator, "group_epoch": share.group_epoch, "members": members,
            "offsets": offsets}

    def render(con: Any) -> None:
        con.print(f"group {share.group}  type {SHARE_TYPE}  state {share.state}  assignor {share.assignor or '-'}  "
                  f"coordinator {share.coordinator}  epoch {share.group_epoch}\n", soft_wrap=True)
        con.print(table(["MEMBER", "CLIENT", "HOST", "ASSIGNMENT"],
                        [[m["member"], m["client"], m["host"], ",".join(m["assignment"]) or "-"] for m in members]))
        con.print()
        con.print(table(["TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                        [[o["topic"], o["partition"], o["start_offset"], o["lag"] if o["error"] is None
                          else o["error"]] for o in offsets], right=("PARTITION", "START-OFFSET", "LAG")))
    return emit(args, data, render)


def _tp(topic: str, partition: int, offset: int | None = None):
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition) if offset is None else TopicPartition(topic, partition, offset)


def cmd_delete(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    result(admin.delete_consumer_groups([args.group], request_timeout=args.timeout)[args.group],
           f"delete {args.group}", args.timeout)
    print(f"deleted group {args.group}")
    return 0


def _refuse_share_group(args: argparse.Namespace) -> None:
    """ToolError if the group is a share group: committing consumer offsets under its name would not move its
    start offsets (that is AlterShareGroupOffsets, which this command does not send)."""
    share, _ = _share_description(args)  # when it cannot tell, the broker decides
    if share is not None:
        raise ToolError(f"{args.group} is a share group: reset-offsets moves consumer groups' committed offsets "
                        "only, not a share group's start offsets")


def cmd_reset(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions

    from odradek.tools.topics import topic_offsets

    admin = admin_client(args)
    partitions = topic_partitions(admin, args, args.topic)
    _refuse_share_group(args)
    committed = committed_offsets(admin, args.group, args.timeout)
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
            done = result(admin.alter_consumer_group_offsets([request], request_timeout=args.timeout)[args.group],
                          f"reset offsets of {args.group}", args.timeout)
            failed = [tp for tp in done.topic_partitions if tp.error is not None]
            if failed:
                raise ToolError("; ".join(f"{tp.topic}:{tp.partition}: {tp.error}" for tp in failed))
            bar.advance(bar.task, len(chunk))
    print(f"reset {len(plan)} partition(s) of {args.group}")
    return 0


_ACTIONS = {"list": cmd_list, "describe": cmd_describe, "delete": cmd_delete, "reset-offsets": cmd_reset}
