"""The clickstream pipeline's live view without Spark: the frame rendered from figures, and the WindowFeed reading
windows back from a real broker (committed ones only, old ones not announced as new, garbage ignored) with the
input topic's high watermarks for the lag."""

from __future__ import annotations

import json

from odradek.pipelines.live_view import (ViewState, WindowFeed, consumed_offsets, lag_behind, render_text,
                                         window_line)
from tests.interop.helpers import wait_until

from .util import create_topic

W1 = ("2026-11-28T11:04:00Z", "2026-11-28T11:05:00Z")
W2 = ("2026-11-28T11:05:00Z", "2026-11-28T11:06:00Z")


def test_frame_shows_top_pages_figures_and_falling_behind():
    state = ViewState(windows={W1: {"/": 412, "/home": 301, "/cart": 50, "/a": 3, "/b": 2, "/c": 1},
                               W2: {"/home": 310, "/": 300}},
                      batches=4, read_total=3000, written_total=16, last_read=500, last_written=8,
                      duration_ms=12_300, trigger_ms=10_000, lag=120, elapsed_s=65)
    text = render_text(state)
    lines = text.splitlines()
    header = next(line for line in lines if "11:04-11:05" in line)
    assert "11:05-11:06" in header and header.index("11:04-11:05") < header.index("11:05-11:06")
    first = next(line for line in lines if line.lstrip().startswith("1 "))
    assert "/ 412" in first and "/home 310" in first  # each window's top page first
    assert "/c 1" not in text  # only the top 5 pages of a window
    assert "769 views" in text and "610 views" in text
    assert "read 3,000 (+500)" in text and "written 16 (+8)" in text and "lag 120" in text
    assert "batch 12.3 s / trigger 10 s" in text
    assert sum("falling behind" in line for line in lines) == 1

    keeping_up = render_text(ViewState(windows={W1: {"/": 1}}, duration_ms=900, trigger_ms=10_000))
    assert "falling behind" not in keeping_up
    assert "waiting for the first window" in render_text(ViewState())
    # availableNow has no interval: never "falling behind"
    assert "falling behind" not in render_text(ViewState(duration_ms=60_000, trigger_ms=None))
    assert window_line(W1, state.windows[W1]).startswith("window 11:04-11:05 UTC: / 412, /home 301, /cart 50")


def test_lag_is_high_watermark_minus_consumed_offsets():
    progress = {"sources": [{"endOffset": json.dumps({"pageviews": {"0": 40, "1": 35}})}]}
    consumed = consumed_offsets(progress)
    assert consumed == {("pageviews", 0): 40, ("pageviews", 1): 35}
    assert lag_behind({("pageviews", 0): 100, ("pageviews", 1): 35}, consumed) == 60
    assert lag_behind({("other", 0): 5}, consumed) is None
    # hostile progress: what Spark would never send is skipped, not a crash
    assert consumed_offsets({"sources": [{"endOffset": "not json"}, {"endOffset": {"t": {"x": 1, "0": "7"}}},
                                         {}]}) == {}


def _window_record(window: tuple[str, str], page: str, count: int) -> bytes:
    return json.dumps({"window_start": window[0], "window_end": window[1], "page": page, "count": count}).encode()


def test_window_feed_reads_committed_windows_and_high_watermarks(broker):
    from confluent_kafka import Producer

    create_topic(broker.bootstrap, "lv-out", partitions=2)
    create_topic(broker.bootstrap, "lv-in", partitions=2)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("lv-out", key=b"/", value=_window_record(W1, "/", 5), partition=0)  # before the feed: old
    plain.produce("lv-out", value=b"\xff not json", partition=1)
    plain.produce("lv-out", value=json.dumps({"page": "/"}).encode(), partition=1)  # JSON, not a window
    for i in range(7):
        plain.produce("lv-in", value=b"{}", partition=i % 2)
    assert plain.flush(30) == 0

    feed = WindowFeed(broker.bootstrap, "lv-out", "lv-in").start()
    try:
        wait_until(lambda: feed.snapshot()[1] == {("lv-in", 0): 4, ("lv-in", 1): 3}, timeout=30,
                   message="the input topic's high watermarks")
        wait_until(lambda: W1 in feed.snapshot()[0], timeout=30, message="the old window read from the tail")

        tx = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "lv-test"})
        tx.init_transactions(30)
        tx.begin_transaction()
        tx.produce("lv-out", value=_window_record(W2, "/aborted", 999), partition=0)
        tx.flush(30)
        tx.abort_transaction(30)
        tx.begin_transaction()
        tx.produce("lv-out", value=_window_record(W2, "/", 7), partition=0)
        tx.produce("lv-out", value=_window_record(W2, "/cart", 2), partition=1)
        tx.commit_transaction(30)

        new = wait_until(lambda: feed.new_windows(), timeout=30, message="the committed window")
        assert new == [(W2, {"/": 7, "/cart": 2})]  # the old window is not announced, the aborted row never seen
        assert feed.new_windows() == []  # announced once
        windows, _ = feed.snapshot()
        assert windows == {W1: {"/": 5}, W2: {"/": 7, "/cart": 2}}
        assert feed.error is None
    finally:
        feed.stop()


class _FinishedQuery:
    """The part of a StreamingQuery ProgressReport reads: its recent progress, as Spark's JSON dicts."""

    def __init__(self, progress: list[dict]) -> None:
        self.recentProgress = progress


def _progress(name: str, batch: int, rows: int, written: int, ms: int) -> dict:
    return {"name": name, "batchId": batch, "numInputRows": rows, "durationMs": {"triggerExecution": ms},
            "sink": {"numOutputRows": written},
            "sources": [{"endOffset": json.dumps({"pageviews": {"0": 10 * (batch + 1)}}),
                         "latestOffset": json.dumps({"pageviews": {"0": 100}})}]}


def test_batch_lines_say_falling_behind_and_summary_counts_what_sinks_report(capsys):
    from odradek.spark.job import ProgressReport

    report = ProgressReport("clickstream", "lines", trigger_ms=5_000)
    report.poll([_FinishedQuery([_progress("kafka", 0, 40, 8, 2_000), _progress("kafka", 1, 0, 0, 100),
                                 _progress("kafka", 2, 40, 0, 7_500)])])
    report.poll([_FinishedQuery([_progress("kafka", 2, 40, 0, 7_500)])])  # seen already: not again
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["kafka batch 0: read 40, wrote 8, 2.0 s, lag 90",
                     "kafka batch 2: read 40, wrote 0, 7.5 s, lag 70, falling behind (trigger 5 s)"]
    assert report.summary("stopped").startswith("clickstream stopped: 2 micro-batches, 80 rows read, 8 written in ")

    uncounted = ProgressReport("tables sync", "quiet")
    uncounted.poll([_FinishedQuery([{**_progress("t", 0, 5, 0, 10), "sink": {"numOutputRows": -1}}])])
    assert capsys.readouterr().out == ""
    assert uncounted.summary("stopped").startswith("tables sync stopped: 1 micro-batches, 5 rows read in ")


def test_a_summary_counts_the_events_of_queries_sharing_one_input_once():
    from odradek.spark.job import ProgressReport

    # the clickstream's two queries (topic and Parquet sinks) read the same 80 events over two batches each
    report = ProgressReport("clickstream", "quiet", one_input=True)
    report.poll([_FinishedQuery([_progress("kafka", 0, 40, 8, 2_000), _progress("kafka", 1, 40, 0, 2_000)]),
                 _FinishedQuery([_progress("parquet", 0, 40, 8, 2_000), _progress("parquet", 1, 40, 0, 2_000)])])
    assert report.totals() == (2, 80, 8)
    assert report.summary("stopped").startswith("clickstream stopped: 2 micro-batches, 80 rows read, 8 written in ")
    summed = ProgressReport("tables sync", "quiet")
    summed.poll([_FinishedQuery([_progress("a", 0, 40, 8, 2_000)]), _FinishedQuery([_progress("b", 0, 30, 6, 2_000)])])
    assert summed.totals() == (2, 70, 14)
