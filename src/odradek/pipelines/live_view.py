"""What the clickstream pipeline shows while it runs: its results (the latest complete 1-minute windows, read
back from the `pageviews-per-minute` topic) beside its progress (events read and written, lag behind the input
topic's end, micro-batch duration, "falling behind").

* `WindowFeed` is a thread with its own consumer (read_committed, so only windows of committed micro-batches):
  it reads the output topic from near its end and asks for the input topic's high watermarks; `snapshot()`
  hands its state to the thread that prints.
* `ViewState` is everything one frame shows; `render_view(state)` turns it into a rich renderable (the live
  view on a terminal) and `render_text(state)` into plain text (what a test reads). `window_line(...)` is the
  one line per new window printed when stdout is not a terminal.
* `lag_behind(...)` is the lag: the input topic's high watermarks minus the offsets a query has consumed
  (the `endOffset` of its latest micro-batch).
"""

from __future__ import annotations

import io
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

TOP_PAGES = 5
WINDOWS_SHOWN = 3
# How far back in the output topic (per partition) the feed starts: enough for the last few windows' rows
TAIL_RECORDS = 64
WATERMARK_EVERY_S = 1.0

Window = tuple[str, str]  # (window_start, window_end) as the pipeline writes them: "2026-11-28T11:04:00Z"


@dataclass
class ViewState:
    """One frame of the live view (figures of the latest micro-batch and the totals since start)."""

    windows: dict[Window, dict[str, int]] = field(default_factory=dict)  # page -> views, per complete window
    batches: int = 0
    read_total: int = 0
    written_total: int = 0
    last_read: int | None = None
    last_written: int | None = None
    duration_ms: int | None = None  # the latest micro-batch's triggerExecution
    trigger_ms: int | None = None  # the processing-time trigger's interval (None: availableNow)
    lag: int | None = None
    elapsed_s: float = 0.0

    @property
    def falling_behind(self) -> bool:
        return bool(self.trigger_ms and self.duration_ms is not None and self.duration_ms > self.trigger_ms)


def _hhmm(stamp: str) -> str:
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).strftime("%H:%M")
    except ValueError:
        return stamp


def top_pages(counts: dict[str, int], n: int = TOP_PAGES) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def window_line(window: Window, counts: dict[str, int]) -> str:
    """`window 11:04-11:05 UTC: / 412, /home 301, /products 240, ... (1,203 views, 8 pages)`."""
    pages = ", ".join(f"{page} {views}" for page, views in top_pages(counts))
    more = ", ..." if len(counts) > TOP_PAGES else ""
    return (f"window {_hhmm(window[0])}-{_hhmm(window[1])} UTC: {pages}{more} "
            f"({sum(counts.values()):,} views, {len(counts)} pages)")


def render_view(state: ViewState) -> RenderableType:
    """The table of the latest complete windows (a column each, top pages by views per minute) and the
    progress line under it; a "falling behind" line when the latest micro-batch outlasted its trigger."""
    latest = sorted(state.windows)[-WINDOWS_SHOWN:]
    table = Table(expand=False, pad_edge=False, box=None, header_style="bold")
    if not latest:
        table.add_column("waiting for the first window to close (a minute, then the watermark's lateness)")
    else:
        table.add_column("#", justify="right", style="dim")
        for w in latest:
            table.add_column(f"{_hhmm(w[0])}-{_hhmm(w[1])}", justify="left", no_wrap=True)
        ranked = [top_pages(state.windows[w]) for w in latest]
        for i in range(max(len(r) for r in ranked)):
            table.add_row(str(i + 1), *(f"{r[i][0]} {r[i][1]}" if i < len(r) else "" for r in ranked))
        table.add_row("", *(Text(f"{sum(state.windows[w].values()):,} views", style="dim") for w in latest))
    figures = [f"batches {state.batches}",
               f"read {state.read_total:,}" + (f" (+{state.last_read:,})" if state.last_read is not None else ""),
               f"written {state.written_total:,}"
               + (f" (+{state.last_written:,})" if state.last_written is not None else ""),
               f"lag {state.lag:,}" if state.lag is not None else "lag -",
               (f"batch {state.duration_ms / 1000:.1f} s" if state.duration_ms is not None else "batch -")
               + (f" / trigger {state.trigger_ms / 1000:g} s" if state.trigger_ms else ""),
               f"up {state.elapsed_s:.0f} s"]
    lines: list[RenderableType] = [Text("page views per minute, top pages of the latest complete windows (UTC)",
                                        style="bold"), table, Text(" | ".join(figures))]
    if state.falling_behind:
        lines.append(Text(f"falling behind: the latest micro-batch took {state.duration_ms / 1000:.1f} s, longer "
                          f"than the {state.trigger_ms / 1000:g} s trigger", style="yellow"))
    lines.append(Text("Ctrl-C to stop", style="dim"))
    return Group(*lines)


def render_text(state: ViewState, width: int = 100) -> str:
    """The view as plain text, as it would look on a terminal `width` columns wide."""
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False, legacy_windows=False).print(
        render_view(state))
    return out.getvalue()


def consumed_offsets(progress: dict[str, Any]) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} a micro-batch's sources read up to (its `endOffset`s)."""
    out: dict[tuple[str, int], int] = {}
    for source in progress.get("sources") or []:
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if not isinstance(end, dict):
            continue
        for topic, parts in end.items():
            if isinstance(parts, dict):
                for part, offset in parts.items():
                    if isinstance(offset, int) and str(part).lstrip("-").isdigit():
                        out[(topic, int(part))] = offset
    return out


def lag_behind(high_watermarks: dict[tuple[str, int], int], consumed: dict[tuple[str, int], int]) -> int | None:
    """Records in the topic not yet consumed: the high watermark minus the consumed offset, summed over the
    partitions both know (None when they share none)."""
    shared = set(high_watermarks) & set(consumed)
    if not shared:
        return None
    return sum(max(high_watermarks[tp] - consumed[tp], 0) for tp in shared)


class WindowFeed:
    """The windows the pipeline has committed to `output_topic` and the high watermarks of `input_topic`,
    kept up to date by a daemon thread. Not for Spark: a plain consumer of odradek's (or any Kafka) broker."""

    def __init__(self, bootstrap: str, output_topic: str, input_topic: str,
                 client: dict[str, Any] | None = None) -> None:
        self.bootstrap, self.output_topic, self.input_topic = bootstrap, output_topic, input_topic
        self.client = client or {}
        self._lock = threading.Lock()
        self._windows: dict[Window, dict[str, int]] = {}
        self._settled: set[Window] = set()  # windows whose rows were all read (a poll came back empty after)
        self._fresh: set[Window] = set()  # windows written since the feed started (not read from the tail)
        self._handed: set[Window] = set()  # fresh windows new_windows() has returned
        self._start: dict[int, int] = {}  # per output partition, its high watermark when the feed started
        self._high: dict[tuple[str, int], int] = {}
        self._caught_up = 0.0  # monotonic time of the latest poll that found nothing new
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-view-feed", daemon=True)
        self.error: str | None = None

    def start(self) -> "WindowFeed":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def snapshot(self) -> tuple[dict[Window, dict[str, int]], dict[tuple[str, int], int]]:
        """(settled windows -> page counts, input topic's high watermarks)."""
        with self._lock:
            return ({w: dict(c) for w, c in self._windows.items() if w in self._settled}, dict(self._high))

    def catch_up(self, timeout_s: float = 3.0) -> None:
        """Wait (at most `timeout_s`) until the feed has read what the topic holds now."""
        asked = time.monotonic()
        deadline = asked + timeout_s
        while self._thread.is_alive() and self._caught_up <= asked and time.monotonic() < deadline:
            time.sleep(0.1)

    def new_windows(self) -> list[tuple[Window, dict[str, int]]]:
        """The settled windows written since the feed started that this method has not returned yet."""
        with self._lock:
            new = sorted(w for w in self._settled & self._fresh if w not in self._handed)
            self._handed.update(new)
            return [(w, dict(self._windows[w])) for w in new]

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "odradek-live-view",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "enable.partition.eof": False, **self.client})
        try:
            parts = consumer.list_topics(self.output_topic, timeout=10).topics[self.output_topic].partitions
            assignment = []
            for p in sorted(parts):
                low, high = consumer.get_watermark_offsets(TopicPartition(self.output_topic, p), timeout=10)
                self._start[p] = high
                assignment.append(TopicPartition(self.output_topic, p, max(low, high - TAIL_RECORDS)))
            consumer.assign(assignment)
            next_marks = 0.0
            pending: set[Window] = set()
            while not self._stop.is_set():
                if time.monotonic() >= next_marks:
                    next_marks = time.monotonic() + WATERMARK_EVERY_S
                    self._read_high_watermarks(consumer)
                msgs = consumer.consume(500, 0.5)
                if not msgs:
                    with self._lock:
                        self._settled |= pending
                    pending = set()
                    self._caught_up = time.monotonic()
                    continue
                with self._lock:
                    for m in msgs:
                        if m.error() is not None:
                            continue
                        try:
                            v = json.loads(m.value())
                            window = (str(v["window_start"]), str(v["window_end"]))
                            self._windows.setdefault(window, {})[str(v["page"])] = int(v["count"])
                        except (ValueError, KeyError, TypeError):
                            continue  # not one of the pipeline's records
                        pending.add(window)
                        if m.offset() >= self._start.get(m.partition(), 0):
                            self._fresh.add(window)
                    for old in sorted(self._windows)[:-4 * WINDOWS_SHOWN]:
                        self._windows.pop(old, None)
                        self._settled.discard(old)
        except (KafkaException, KeyError) as exc:
            self.error = str(exc)
        finally:
            consumer.close()

    def _read_high_watermarks(self, consumer: Any) -> None:
        from confluent_kafka import TopicPartition

        topic = consumer.list_topics(self.input_topic, timeout=5).topics.get(self.input_topic)
        if topic is None or topic.error is not None:
            return
        marks = {}
        for p in topic.partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(self.input_topic, p), timeout=5, cached=False)
            marks[(self.input_topic, p)] = high
        with self._lock:
            self._high = marks
