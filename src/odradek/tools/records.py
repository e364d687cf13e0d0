"""`odradek records delete`: move a partition's log start forward (DeleteRecords), as Kafka's
`kafka-delete-records`:

    odradek records delete TOPIC [--partition P ...] --before OFFSET

Records before OFFSET become unreadable and their segments are removed; `--before -1` deletes
everything up to the high watermark. Without --partition every partition of the topic is cut.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.tools.common import ToolError, admin_client, connection_options, emit, result, run_command, table, \
    topic_partitions


def add_parser(sub: Any) -> None:
    records = sub.add_parser("records", help="delete the records before an offset (DeleteRecords)")
    actions = records.add_subparsers(dest="action", required=True)
    delete = actions.add_parser("delete", parents=[connection_options(output=True)],
                                help="move partitions' log start forward")
    delete.add_argument("topic")
    delete.add_argument("--partition", type=int, action="append", default=None, metavar="P",
                        help="(repeatable; default: every partition)")
    delete.add_argument("--before", type=int, required=True, metavar="OFFSET",
                        help="the new log start offset (-1: the high watermark)")


def run(args: argparse.Namespace) -> int:
    return run_command("records", lambda: cmd_delete(args))


def cmd_delete(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicPartition

    if args.before < -1:
        raise ToolError(f"--before must be an offset or -1, got {args.before}")
    admin = admin_client(args)
    known = topic_partitions(admin, args, args.topic)
    wanted = sorted(set(args.partition)) if args.partition else known
    missing = [p for p in wanted if p not in known]
    if missing:
        raise ToolError(f"{args.topic} has no partition {', '.join(map(str, missing))} "
                        f"(it has {len(known)})")
    futures = admin.delete_records([TopicPartition(args.topic, p, args.before) for p in wanted],
                                   request_timeout=args.timeout)
    done = []
    for tp, future in sorted(futures.items(), key=lambda item: item[0].partition):
        answer = result(future, f"delete records of {args.topic}:{tp.partition}", args.timeout)
        low = getattr(answer, "low_watermark", getattr(answer, "offset", -1))
        done.append({"topic": args.topic, "partition": tp.partition, "log_start_offset": low})
    return emit(args, done, lambda con: con.print(table(
        ["TOPIC", "PARTITION", "LOG-START"], [[d["topic"], d["partition"], d["log_start_offset"]] for d in done],
        right=("PARTITION", "LOG-START"))))
