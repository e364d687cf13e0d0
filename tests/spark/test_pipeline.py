"""The clickstream pipeline end to end: generated page views -> windowed counts in Kafka and Parquet,
checked against counts computed in plain Python; through format("odradek") and through Spark's own
format("kafka") (`--connector kafka`; skipped where that package could not be resolved)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import pytest

from odradek.pipelines import clickstream

from .util import create_topic, read_all, stream_run


@pytest.mark.parametrize("connector", clickstream.CONNECTORS)
def test_clickstream_end_to_end(spark, broker, tmp_path, connector, request):
    if connector == "odradek":
        clickstream.ensure_topics(broker.bootstrap)
        input_topic, output_topic = clickstream.INPUT_TOPIC, clickstream.OUTPUT_TOPIC
    else:  # topics of its own: the module's broker is shared with the odradek run
        request.getfixturevalue("kafka_connector")
        input_topic, output_topic = "pageviews-kafka", "pageviews-per-minute-kafka"
        create_topic(broker.bootstrap, input_topic, 4)
        create_topic(broker.bootstrap, output_topic, 4)
    start = 1_700_000_000_000 - 1_700_000_000_000 % 60_000  # a minute boundary
    events = clickstream.generate_events(600, start + 1_234, 6 * 60_000, seed=11, disorder_ms=20_000)
    assert clickstream.produce_events(broker.bootstrap, events, topic=input_topic) == 600
    watermark_ms = 30_000
    expected = clickstream.expected_counts(events, watermark_ms)
    assert len({w for w, _ in expected}) == 5  # minutes 0-4 are closed; minute 5 is still open

    counts = clickstream.page_counts(spark, broker.bootstrap, topic=input_topic, watermark="30 seconds",
                                     max_offsets_per_trigger=300, connector=connector)
    out = str(tmp_path / "parquet")
    queries = clickstream.start_sinks(counts, broker.bootstrap, out, str(tmp_path / "cp"), output_topic=output_topic,
                                      exactly_once="auto", trigger={"availableNow": True}, connector=connector)
    for q in queries:
        stream_run(q, timeout=240)

    from_parquet = {(int(r.window_start.replace(tzinfo=timezone.utc).timestamp() * 1000), r.page): r["count"]
                    for r in spark.read.parquet(out).collect()}
    assert from_parquet == expected

    from_kafka: dict = {}
    for m in read_all(broker.bootstrap, output_topic, 4, isolation="read_committed"):
        v = json.loads(m.value())
        assert m.key().decode() == v["page"]
        ws = int(datetime.strptime(v["window_start"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
                 .timestamp() * 1000)
        assert (ws, v["page"]) not in from_kafka, "a window was emitted twice"
        from_kafka[(ws, v["page"])] = v["count"]
    assert from_kafka == expected


# ---------------------------------------------------------------------------------------------------
# `odradek pipeline clickstream` as a user runs it: a process of its own, stopped with Ctrl-C, restarted
# ---------------------------------------------------------------------------------------------------

# Java stack frames ("\tat org.apache...") and Spark's log lines above INFO, Python tracebacks, Spark's known noise
NOISE = ("Traceback", "Exception", "WARN", "ERROR", "\tat ", "SPARK_JOB_CANCELLED", "replaced a statically registered",
         "Current batch is falling behind")


def _pipeline(bootstrap: str, tmp_path, *more: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "odradek", "pipeline", "clickstream", "--bootstrap", bootstrap, "--rate", "0",
           "--watermark", "30 seconds", "--output", str(tmp_path / "parquet"),
           "--checkpoint", str(tmp_path / "cp"), "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1", *more]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=tmp_path)


def _lines_until(proc: subprocess.Popen, predicate, timeout: float) -> list[str]:
    """The process's output lines up to the first one matching `predicate` (bounded by `timeout`)."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    done = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            got.append(line)
            if predicate(line):
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(max(deadline - time.monotonic(), 0)), f"no such line in time; output so far:\n{''.join(got)}"
    return got


def _assert_quiet(output: str) -> None:
    for word in NOISE:
        assert word not in output, f"{word!r} on the pipeline's screen:\n{output}"


@pytest.mark.timeout(900)  # two runs of the pipeline, each a JVM start: minutes on a busy 2-core machine
def test_ctrl_c_stops_cleanly_and_restart_loses_nothing(broker_factory, tmp_path):
    """Ctrl-C mid-stream: exit 0, a summary line, nothing of Spark's on screen; the restarted pipeline then
    completes from the checkpoint with every closed window once, in Parquet and in the topic, as an
    uninterrupted run computes them (expected_counts, the reference test_clickstream_end_to_end holds the
    pipeline to)."""
    broker = broker_factory()
    clickstream.ensure_topics(broker.bootstrap)
    start = 1_700_000_000_000 - 1_700_000_000_000 % 60_000
    events = clickstream.generate_events(600, start + 1_234, 6 * 60_000, seed=13, disorder_ms=20_000)
    assert clickstream.produce_events(broker.bootstrap, events) == 600
    expected = clickstream.expected_counts(events, 30_000)

    first = _pipeline(broker.bootstrap, tmp_path, "--trigger-seconds", "1", "--max-offsets-per-trigger", "40")
    try:
        # the first complete window on screen, read back from the topic (stdout is a pipe: one line per window)
        before = _lines_until(first, lambda line: line.startswith("window "), timeout=420)
        first.send_signal(signal.SIGINT)
        rest, _ = first.communicate(timeout=240)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    output = "".join(before) + rest
    assert first.returncode == 0, output
    assert "clickstream stopped:" in output, output
    _assert_quiet(output)
    summary = [line for line in output.splitlines() if line.startswith("clickstream stopped:")]
    assert len(summary) == 1, output
    assert any(" batch " in line and ": read " in line for line in before), output  # per-batch lines came first
    # the first window shown is the first window of the events, with its top page and its count
    first_start = min(ws for ws, _ in expected)
    first_counts = {page: n for (ws, page), n in expected.items() if ws == first_start}
    top_page, top_views = sorted(first_counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    hhmm = datetime.fromtimestamp(first_start / 1000, timezone.utc).strftime("%H:%M")
    shown = [line for line in output.splitlines() if line.startswith("window ")]
    assert shown[0].startswith(f"window {hhmm}-"), output
    assert f": {top_page} {top_views}," in shown[0] and f"({sum(first_counts.values())} views" in shown[0], output

    second = _pipeline(broker.bootstrap, tmp_path, "--available-now", "--quiet")
    out2, _ = second.communicate(timeout=300)
    assert second.returncode == 0, out2
    assert "clickstream finished:" in out2, out2
    _assert_quiet(out2)

    import pyarrow.parquet as pq

    table = pq.read_table(str(tmp_path / "parquet")).to_pylist()
    from_parquet: dict = {}
    for r in table:
        key = (int(r["window_start"].replace(tzinfo=timezone.utc).timestamp() * 1000), r["page"])
        assert key not in from_parquet, f"window {key} written twice to Parquet"
        from_parquet[key] = r["count"]
    assert from_parquet == expected

    from_kafka: dict = {}
    for m in read_all(broker.bootstrap, clickstream.OUTPUT_TOPIC, 4, isolation="read_committed"):
        v = json.loads(m.value())
        ws = int(datetime.strptime(v["window_start"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
                 .timestamp() * 1000)
        assert (ws, v["page"]) not in from_kafka, "a window was written twice to the topic"
        from_kafka[(ws, v["page"])] = v["count"]
    assert from_kafka == expected


def _stop_with_ctrl_c(proc: subprocess.Popen, before: list[str]) -> str:
    """SIGINT, then everything it prints until it exits (bounded); its whole output."""
    try:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return "".join(before) + rest


@pytest.mark.timeout(1200)  # two runs of the pipeline, each a JVM start: minutes on a busy 2-core machine
def test_generated_stream_shows_a_closed_window_and_restarts_without_a_gap(broker_factory, tmp_path):
    """`make pipeline` as a newcomer runs it: the generator on, the default 1-minute watermark. The generator
    starts two minutes back in event time, so a closed window is printed without waiting the watermark out
    (stdout a pipe: one line per window); Ctrl-C stops it quietly; a restart's generator continues from the
    topic's latest event, and the topic then holds every minute once, with no gap between the two runs."""
    broker = broker_factory()
    live = ("--rate", "20", "--watermark", "1 minute", "--trigger-seconds", "2")
    seen: list[str] = []
    for run in range(2):
        proc = _pipeline(broker.bootstrap, tmp_path, *live)
        before = _lines_until(proc, lambda line: line.startswith("window "), timeout=420)
        output = _stop_with_ctrl_c(proc, before)
        assert proc.returncode == 0, output
        _assert_quiet(output)
        assert len([line for line in output.splitlines() if line.startswith("clickstream stopped:")]) == 1, output
        shown = [line for line in output.splitlines() if line.startswith("window ")]
        assert shown and all(" views, " in line for line in shown), output
        seen += shown
    assert len(seen) == len(set(seen)), f"a window printed by both runs: {seen}"

    windows: dict = {}
    for m in read_all(broker.bootstrap, clickstream.OUTPUT_TOPIC, 4, isolation="read_committed"):
        v = json.loads(m.value())
        key = (v["window_start"], v["page"])
        assert key not in windows, f"window {key} written twice to the topic"
        windows[key] = v["count"]
    starts = sorted({int(datetime.strptime(ws, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())
                     for ws, _ in windows})
    assert len(starts) >= 2, windows
    assert starts == list(range(starts[0], starts[-1] + 60, 60)), f"a minute missing between the runs: {starts}"
    # each printed window is in the topic with the views the line gives
    for line in seen:
        hhmm = line.split()[1].split("-")[0]
        total = sum(n for (ws, _), n in windows.items() if ws[11:16] == hhmm)
        assert f"({total:,} views, " in line, (line, windows)
