"""What the admin commands share: `--bootstrap`, `--command-config`, `--output`, `--timeout`, the
confluent-kafka clients built from them, rich tables (or JSON lines) on stdout, and one-line errors.

`--command-config FILE` is a client properties file (`key=value` lines, `#` comments), handed as it is
to librdkafka: `security.protocol`, `sasl.*`, `ssl.*`, `client.id`, ... so that every command works
against a secured or remote broker, odradek's or Apache Kafka's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT_S = 15.0


class ToolError(Exception):
    """A failure reported as one line on stderr, with exit code 1."""


def connection_options(output: bool = False) -> argparse.ArgumentParser:
    """A parent parser with the options every command takes (and `--output` for those that print
    tables)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"a broker to start from (default {DEFAULT_BOOTSTRAP})")
    common.add_argument("--command-config", type=Path, default=None, metavar="FILE",
                        help="client properties (key=value lines) passed to librdkafka: security.protocol, "
                             "sasl.*, ssl.*, client.id, ...")
    common.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"how long to wait for the cluster (default {DEFAULT_TIMEOUT_S:g} s)")
    if output:
        common.add_argument("--output", choices=("table", "json"), default="table",
                            help="aligned tables (default) or JSON for scripts")
    return common


def positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return number


def key_value(value: str) -> tuple[str, str]:
    """`k=v` (argparse type)."""
    key, sep, val = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {value!r}")
    return key.strip(), val


def key_value_list(value: str) -> list[tuple[str, str]]:
    """`k=v,k2=v2` (argparse type). A value holding commas is written in brackets, as kafka-configs
    wants: `cleanup.policy=[compact,delete]`."""
    pairs, depth, current = [], 0, ""
    for ch in value + ",":
        if ch == "," and depth == 0:
            if current.strip():
                key, val = key_value(current.strip())
                pairs.append((key, val[1:-1] if val.startswith("[") and val.endswith("]") else val))
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        current += ch
    return pairs


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """librdkafka settings: --bootstrap, then `extra` (the command's own), then --command-config (which
    wins: the user's file knows the cluster)."""
    config: dict[str, Any] = {"bootstrap.servers": args.bootstrap, "log_level": 0}
    if not any(ch.isalpha() for ch in args.bootstrap.rsplit(":", 1)[0]):
        config["broker.address.family"] = "v4"  # numeric address: do not try IPv6 for it
    config.update(extra)
    if args.command_config is not None:
        from odradek.config import ConfigError, read_properties

        try:
            config.update(read_properties(args.command_config))
        except (OSError, ConfigError) as exc:
            raise ToolError(f"cannot read --command-config {args.command_config}: {exc}") from None
        config["bootstrap.servers"] = args.bootstrap if args.bootstrap != DEFAULT_BOOTSTRAP else \
            config.get("bootstrap.servers", args.bootstrap)
    return config


def admin_client(args: argparse.Namespace) -> Any:
    """An AdminClient that never has a topic auto-created by asking for its metadata."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        return AdminClient(client_config(args, **{"allow.auto.create.topics": False}))
    except (KafkaException, ValueError, TypeError) as exc:
        raise ToolError(f"bad client configuration: {exc}") from None


def bootstrap_admin(bootstrap: str, **overrides: Any) -> Any:
    """A confluent-kafka AdminClient that never has a topic auto-created by asking for its metadata, and
    stays quiet about brokers it cannot reach (callers report that)."""
    from confluent_kafka.admin import AdminClient

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "broker.address.family": "v4", "log_level": 0,
                              "allow.auto.create.topics": False}
    config.update(overrides)
    return AdminClient(config)


def consumer_client(args: argparse.Namespace, **extra: Any) -> Any:
    from confluent_kafka import Consumer, KafkaException

    settings = {"group.id": "odradek-tools", "enable.auto.commit": False, "allow.auto.create.topics": False,
                **extra}
    try:
        return Consumer(client_config(args, **settings))
    except (KafkaException, ValueError, TypeError) as exc:
        raise ToolError(f"bad client configuration: {exc}") from None


def metadata(client: Any, args: argparse.Namespace, topic: str | None = None) -> Any:
    """The cluster's metadata (every topic, or one); ToolError if it does not answer within --timeout."""
    from confluent_kafka import KafkaException

    try:
        return client.list_topics(topic=topic, timeout=args.timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        raise ToolError(f"cannot reach {args.bootstrap} within {args.timeout:g}s: "
                        f"{getattr(error, 'str', lambda: error)()}") from None


def topic_partitions(client: Any, args: argparse.Namespace, topic: str) -> list[int]:
    """The partition ids of `topic`; ToolError if the cluster does not know it."""
    md = metadata(client, args, topic)
    tmd = md.topics.get(topic)
    if tmd is None or (tmd.error is not None and not tmd.partitions) or not tmd.partitions:
        raise ToolError(f"unknown topic {topic}")
    return sorted(tmd.partitions)


def result(future: Any, what: str, timeout: float) -> Any:
    """A future's result, its failure as a ToolError naming `what`."""
    try:
        return future.result(timeout)
    except Exception as exc:  # noqa: BLE001 - KafkaException carries the broker's error, TimeoutError ours
        error = exc.args[0] if isinstance(exc.args, tuple) and exc.args else exc
        text = error.str() if hasattr(error, "str") else (str(error) or type(exc).__name__)
        raise ToolError(f"{what}: {text}") from None


def list_offsets(admin: Any, partitions: Iterable[tuple[str, int]], timeout: float,
                 latest: bool = True) -> dict[tuple[str, int], int]:
    """Log end (or, with latest=False, log start) offsets of many partitions in one ListOffsets round; -1 for
    a partition that failed (a topic deleted since a group committed to it, say), so one bad partition does
    not hide the others."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
    request = {TopicPartition(t, p): spec for t, p in partitions}
    if not request:
        return {}
    found = {}
    for tp, future in admin.list_offsets(request, request_timeout=timeout).items():
        try:
            found[(tp.topic, tp.partition)] = future.result(timeout).offset
        except Exception:  # noqa: BLE001 - the partition's own error; its offset stays unknown
            found[(tp.topic, tp.partition)] = -1
    return found


def run_command(prog: str, action: Callable[[], int]) -> int:
    """Run a command; a ToolError (or an unexpected client error) becomes `odradek PROG: message` and
    exit code 1, Ctrl-C exit code 130."""
    from confluent_kafka import KafkaException

    try:
        return action()
    except ToolError as exc:
        print(f"odradek {prog}: {exc}", file=sys.stderr)
        return 1
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        print(f"odradek {prog}: {getattr(error, 'str', lambda: error)()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # a pipe gets rich's 80 columns, which would squeeze long topic names: give tables room instead
    width = None if stream.isatty() else 4096
    return Console(width=width, highlight=False, stderr=stderr, soft_wrap=False)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None,
          right: Iterable[str] = ()) -> Any:
    """A rich table without borders (columns aligned, one row a line: easy to read and to grep)."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD if sys.stdout.isatty() else None,
              header_style="bold", pad_edge=False)
    right = set(right)
    for column in header:
        t.add_column(column, justify="right" if column in right else "left", overflow="fold")
    for row in rows:
        t.add_row(*("-" if v is None else str(v) for v in row))
    return t


def emit(args: argparse.Namespace, data: Any, render: Callable[[Any], None]) -> int:
    """`--output json`: `data` as JSON on stdout; otherwise `render(console)`."""
    if getattr(args, "output", "table") == "json":
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(console())
    return 0


def progress(total: int | None, description: str, enabled: bool) -> Any:
    """A rich progress bar on stderr (transient), or a stand-in that does nothing when not `enabled`."""
    if not enabled:
        return _NoProgress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=console(stderr=True), transient=True)
    bar.task = bar.add_task(description, total=total)
    return bar


class _NoProgress:
    task = None

    def __enter__(self) -> "_NoProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def advance(self, task: Any, n: float = 1) -> None:
        return None

    def update(self, task: Any, **kwargs: Any) -> None:
        return None


def text(data: bytes | str | None) -> str | None:
    """Bytes as text (undecodable bytes escaped), for tables and JSON."""
    if data is None or isinstance(data, str):
        return data
    return data.decode("utf-8", errors="backslashreplace")
