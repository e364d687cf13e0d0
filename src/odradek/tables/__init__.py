"""`odradek tables`: topics kept as lakehouse tables (docs/tables.md).

    odradek tables sync --bootstrap HOST:PORT --topic T --path DIR [--schema-registry URL]
                        [--mode append|upsert] [--available-now]

The job itself is a PySpark streaming query (odradek.tables.sync); it needs the `delta` extra
(`pip install 'odradek[delta]'`: pyspark, delta-spark) and a JDK. Delta Lake's jars come from Maven Central
on first use into ~/.cache/odradek/delta (odradek.spark.packages).
"""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    from odradek.tools.common import key_value

    p = sub.add_parser("tables", help="keep topics as Delta Lake tables (needs the 'delta' extra)")
    tables = p.add_subparsers(dest="tables_command", required=True)
    s = tables.add_parser("sync", help="a streaming Spark job that keeps a Delta table in step with a topic",
                          description="Keep a Delta Lake table in step with a topic (or with every topic a "
                                      "pattern matches): append mode for event topics, upsert mode (MERGE by "
                                      "key, tombstones delete) for compacted ones.")
    s.add_argument("--bootstrap", default="127.0.0.1:9092", metavar="HOST:PORT")
    which = s.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic; its table is at --path")
    which.add_argument("--topics-pattern", metavar="REGEX",
                       help="every topic whose whole name matches (internal topics and _schemas left out); "
                            "the table of topic T is at --path/T, and topics created later join while it runs")
    s.add_argument("--path", required=True, help="the Delta table's directory (with --topics-pattern: their parent)")
    s.add_argument("--schema-registry", metavar="URL", default=None,
                   help="decode values through this registry (subject <topic>-value; Avro, JSON Schema or Protobuf, "
                        "as its schemaType says): columns from the schema")
    s.add_argument("--mode", choices=("append", "upsert"), default="append",
                   help="append every record (events), or keep the latest value per key and delete on "
                        "tombstones (compacted topics) (default %(default)s)")
    s.add_argument("--available-now", action="store_true", help="sync what the topic holds now, then stop")
    s.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="Spark's checkpoint (default: _odradek_checkpoint inside each table's directory)")
    s.add_argument("--starting-offsets", choices=("earliest", "latest"), default="earliest",
                   help="where a new table starts reading (default %(default)s)")
    s.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval (default %(default)s)")
    s.add_argument("--max-offsets-per-trigger", type=int, default=None, metavar="N")
    s.add_argument("--check-seconds", type=float, default=10.0,
                   help="how often a running sync looks for new topics and new schema versions "
                        "(default %(default)s)")
    s.add_argument("--master", default="local[*]", help="Spark master (default %(default)s)")
    s.add_argument("--conf", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="a Spark setting (repeatable)")
    s.add_argument("--client", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="a Kafka client setting for the source (repeatable), e.g. security.protocol=SSL")
    s.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    s.add_argument("--log-level", default="INFO")
    s.add_argument("--quiet", action="store_true", help="no per-batch lines, only the summary and errors")


def run(args: argparse.Namespace) -> int:
    from odradek.spark import extra_missing

    if extra_missing("odradek tables", "delta"):
        return 2
    from odradek.tables.sync import main

    return main(args)
