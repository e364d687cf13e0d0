"""`odradek produce` and `odradek consume`: records from stdin to a topic and back, in the manner of kcat.

    odradek produce TOPIC [-K SEP] [-H k=v ...] [-p N] [--acks all|1|0]
        one record per line of stdin (the line ending removed); -K splits each line at the first SEP
        into key and value (a line without SEP: no key); -H adds a header to every record

    odradek consume TOPIC [-o beginning|end|OFFSET|-N|@TIMESTAMP_MS] [-p N ...] [-e] [-c N] [--group G]
                          [-f FORMAT | --output json]
        -o where to start in each partition (default beginning): an offset, -N for N before the end, or
        the first record at or after a timestamp (ms); -e exit once every partition is read to its end;
        -c exit after N records; --group consume as a member of group G (subscribe, commit offsets;
        -o beginning|end then only applies where G has no committed offset)

FORMAT takes kcat's tokens: %t topic, %p partition, %o offset, %k key, %s value, %K key length, %S value
length, %T timestamp (ms), %h headers (k=v,k2=v2), %% and the escapes \\n \\t \\\\. The default is "%s\\n".
`--output json` prints one object per record: topic, partition, offset, timestamp, key, value, headers
(a list of [key, value]; undecodable bytes are escaped as \\xNN). While stdout is a terminal and the number of
records to read is known (-e or -c), a progress bar runs on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

from odradek.tools.common import ToolError, admin_client, client_config, connection_options, consumer_client, \
    key_value, progress, run_command, text, topic_partitions

EOF_POLL_S = 0.5
FORMAT_TOKEN = re.compile(r"%[tpokKsSTh%]|\\[ntr\\]")


def add_parser(sub: Any) -> None:
    produce = sub.add_parser("produce", parents=[connection_options()],
                             help="produce one record per line of stdin")
    produce.add_argument("topic")
    produce.add_argument("-K", dest="key_delimiter", default=None, metavar="SEP",
                         help="split each line at the first SEP into key and value")
    produce.add_argument("-H", dest="headers", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                         help="a header for every record (repeatable)")
    produce.add_argument("-p", dest="partition", type=int, default=None, metavar="N",
                         help="the partition (default: by key, or spread)")
    produce.add_argument("--acks", choices=("all", "1", "0", "-1"), default="all")
    consume = sub.add_parser("consume", parents=[connection_options(output=False)],
                             help="print a topic's records (like kcat -C)")
    consume.add_argument("topic")
    consume.add_argument("-o", dest="offset", default="beginning", metavar="OFFSET",
                         help="beginning, end, an offset, -N (N before the end) or @TIMESTAMP_MS")
    consume.add_argument("-p", dest="partitions", type=int, action="append", default=None, metavar="N",
                         help="only this partition (repeatable)")
    consume.add_argument("-e", dest="exit_at_end", action="store_true", help="exit at the end of the partitions")
    consume.add_argument("-c", dest="count", type=int, default=None, metavar="N", help="exit after N records")
    consume.add_argument("--group", "-G", default=None, metavar="GROUP",
                         help="consume as a member of this group, committing offsets")
    shape = consume.add_mutually_exclusive_group()
    shape.add_argument("-f", dest="format", default=None, metavar="FORMAT",
                       help=r"kcat-like format: %%t %%p %%o %%k %%s %%K %%S %%T %%h, \n (default %%s\n)")
    shape.add_argument("--output", choices=("text", "json"), default="text",
                       help="json: one JSON object per record and line")


# ---------------------------------------------------------------------------------------------------
# produce
# ---------------------------------------------------------------------------------------------------


def run_produce(args: argparse.Namespace) -> int:
    return run_command("produce", lambda: cmd_produce(args))


def cmd_produce(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    if args.key_delimiter == "":
        raise ToolError("-K needs a non-empty separator")
    admin = admin_client(args)
    partitions = topic_partitions(admin, args, args.topic)
    if args.partition is not None and args.partition not in partitions:
        raise ToolError(f"{args.topic} has no partition {args.partition} (it has {len(partitions)})")
    try:
        producer = Producer(client_config(args, **{"acks": args.acks, "linger.ms": 5,
                                                   "message.timeout.ms": int(args.timeout * 1000)}))
    except (KafkaException, ValueError, TypeError) as exc:
        raise ToolError(f"bad client configuration: {exc}") from None
    headers = [(k, v.encode()) for k, v in args.headers]
    sep = args.key_delimiter.encode() if args.key_delimiter else None
    failures: list[str] = []
    sent = 0

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}:{msg.partition()}: {err.str()}")

    for raw in sys.stdin.buffer:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        line = line[:-1] if line.endswith(b"\r") else line
        key, value = None, line
        if sep is not None and sep in line:
            key, value = line.split(sep, 1)
        extra = {} if args.partition is None else {"partition": args.partition}
        while True:
            try:
                producer.produce(args.topic, value=value, key=key, headers=headers or None, on_delivery=delivered,
                                 **extra)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
        sent += 1
    left = producer.flush(args.timeout + 5)
    if left:
        failures.append(f"{left} record(s) not delivered within {args.timeout:g}s")
    if failures:
        raise ToolError(f"{len(failures)} failure(s) producing to {args.topic}; first: {failures[0]}")
    print(f"produced {sent} record(s) to {args.topic}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------------
# consume
# ---------------------------------------------------------------------------------------------------


def run_consume(args: argparse.Namespace) -> int:
    return run_command("consume", lambda: cmd_consume(args))


def parse_start(value: str) -> tuple[str, int]:
    """-o: ("beginning"|"end", 0), ("offset", N), ("tail", N) or ("timestamp", MS)."""
    if value in ("beginning", "end", "stored"):
        return value, 0
    if value.startswith("@") and value[1:].isdigit():
        return "timestamp", int(value[1:])
    if value.isdigit():
        return "offset", int(value)
    if value.startswith("-") and value[1:].isdigit():
        return "tail", int(value[1:])
    raise ToolError(f"bad -o {value!r}: expected beginning, end, an offset, -N or @TIMESTAMP_MS")


def formatter(fmt: str):
    """A function rendering a message with kcat's format tokens, as bytes."""
    pieces: list[Any] = []
    pos = 0
    for m in FORMAT_TOKEN.finditer(fmt):
        if m.start() > pos:
            pieces.append(fmt[pos:m.start()].encode())
        pieces.append(m.group())
        pos = m.end()
    if pos < len(fmt):
        pieces.append(fmt[pos:].encode())
    escapes = {"\\n": b"\n", "\\t": b"\t", "\\r": b"\r", "\\\\": b"\\", "%%": b"%"}

    def field(token: str, msg: Any) -> bytes:
        if token in escapes:
            return escapes[token]
        if token == "%t":
            return msg.topic().encode()
        if token == "%p":
            return str(msg.partition()).encode()
        if token == "%o":
            return str(msg.offset()).encode()
        if token == "%k":
            return msg.key() or b""
        if token == "%s":
            return msg.value() or b""
        if token == "%K":
            return str(len(msg.key()) if msg.key() is not None else -1).encode()
        if token == "%S":
            return str(len(msg.value()) if msg.value() is not None else -1).encode()
        if token == "%T":
            return str(msg.timestamp()[1]).encode()
        return b",".join(k.encode() + b"=" + (v or b"") for k, v in (msg.headers() or []))  # %h

    def render(msg: Any) -> bytes:
        return b"".join(p if isinstance(p, bytes) else field(p, msg) for p in pieces)

    return render


def as_json(msg: Any) -> bytes:
    record = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
              "timestamp": msg.timestamp()[1], "key": text(msg.key()), "value": text(msg.value()),
              "headers": [[k, text(v)] for k, v in (msg.headers() or [])]}
    return json.dumps(record, ensure_ascii=False).encode() + b"\n"


def _start_offsets(admin: Any, args: argparse.Namespace, partitions: list[int],
                   start: tuple[str, int]) -> tuple[dict[int, int], dict[int, int]]:
    """partition -> the offset to start at, and partition -> log end offset (what -e reads up to)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from odradek.tools.common import result
    from odradek.tools.topics import topic_offsets

    bounds = topic_offsets(admin, args, args.topic, partitions)
    kind, n = start
    starts: dict[int, int] = {}
    if kind == "timestamp":
        futures = admin.list_offsets({TopicPartition(args.topic, p): OffsetSpec.for_timestamp(n) for p in partitions},
                                     request_timeout=args.timeout)
        for tp, future in futures.items():
            found = result(future, f"offset of {args.topic}:{tp.partition} at {n}", args.timeout).offset
            starts[tp.partition] = found if found >= 0 else bounds[tp.partition][1]  # none that late: the end
    for p, (low, high) in bounds.items():
        if kind == "beginning":
            starts[p] = low
        elif kind == "end":
            starts[p] = high
        elif kind == "offset":
            starts[p] = min(max(n, low), high)
        elif kind == "tail":
            starts[p] = max(high - n, low)
    return starts, {p: high for p, (_, high) in bounds.items()}


def cmd_consume(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, TopicPartition

    if args.count is not None and args.count < 0:
        raise ToolError(f"-c must be at least 0, got {args.count}")
    start = parse_start(args.offset)
    render = as_json if args.output == "json" else formatter(args.format if args.format is not None else "%s\\n")
    admin = admin_client(args)
    known = topic_partitions(admin, args, args.topic)
    partitions = sorted(set(args.partitions)) if args.partitions else known
    missing = [p for p in partitions if p not in known]
    if missing:
        raise ToolError(f"{args.topic} has no partition {', '.join(map(str, missing))} (it has {len(known)})")
    starts, ends = _start_offsets(admin, args, partitions, start)
    if args.group is not None:
        if start[0] not in ("beginning", "end", "stored"):
            raise ToolError("with --group, -o can only be beginning or end (where the group has no offset)")
        consumer = consumer_client(args, **{"group.id": args.group, "enable.auto.commit": True,
                                            "auto.offset.reset": "latest" if start[0] == "end" else "earliest",
                                            "enable.partition.eof": True})
        consumer.subscribe([args.topic])
        total = None
    else:
        consumer = consumer_client(args, **{"enable.partition.eof": True})
        consumer.assign([TopicPartition(args.topic, p, starts[p]) for p in partitions])
        total = sum(max(ends[p] - starts[p], 0) for p in partitions)
    if args.count is not None:
        total = args.count if total is None else min(total, args.count)
    if not args.exit_at_end and args.count is None:
        total = None
    out = sys.stdout.buffer
    # -e without a group: a partition is done once read up to the end it had when we started (or when the
    # client says it reached the end: a transaction's last marker is never delivered)
    at_end = {p for p in partitions if starts[p] >= ends[p]} if args.group is None else set()
    seen = 0
    show = total is not None and total > 0 and sys.stdout.isatty()
    pending: list[bytes] = []
    flushed = time.monotonic()
    try:
        with progress(total, f"consuming {args.topic}", show) as bar:
            while args.count is None or seen < args.count:
                if args.exit_at_end and args.group is None and at_end >= set(partitions):
                    break
                if args.exit_at_end and args.group is not None and at_end and at_end >= _assigned(consumer):
                    break
                msg = consumer.poll(EOF_POLL_S)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    if msg.error().fatal() or msg.error().code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                                     KafkaError._UNKNOWN_TOPIC,
                                                                     KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                                     KafkaError.GROUP_AUTHORIZATION_FAILED):
                        raise ToolError(f"{args.topic}: {msg.error().str()}")
                    print(f"odradek consume: {msg.error().str()}", file=sys.stderr)
                    continue
                if args.group is None and msg.offset() + 1 >= ends[msg.partition()]:
                    at_end.add(msg.partition())
                elif args.group is not None:
                    at_end.discard(msg.partition())
                data = render(msg)
                if show:  # printed above the bar (rich redirects stdout), in batches: line by line is slow
                    pending.append(data)
                    if len(pending) >= 1000 or time.monotonic() - flushed > 0.2:
                        flushed = _flush(pending, bar)
                else:
                    out.write(data)
                seen += 1
            _flush(pending, bar)
    finally:
        sys.stdout.flush()
        consumer.close()
    return 0


def _flush(pending: list[bytes], bar: Any) -> float:
    """Write the records held back while a progress bar shows, and advance it; the time of the flush."""
    if pending:
        sys.stdout.write(b"".join(pending).decode("utf-8", errors="backslashreplace"))
        sys.stdout.flush()
        bar.advance(bar.task, len(pending))
        pending.clear()
    return time.monotonic()


def _assigned(consumer: Any) -> set[int]:
    try:
        return {tp.partition for tp in consumer.assignment()}
    except Exception:  # noqa: BLE001 - closed or not yet joined: nothing assigned
        return set()
