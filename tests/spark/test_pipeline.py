"""The clickstream pipeline end to end: generated page views -> windowed counts in Kafka and Parquet,
checked against counts computed in plain Python; through format("odradek") and through Spark's own
format("kafka") (`--connector kafka`; skipped where that package could not be resolved)."""

from __future__ import annotations

import json
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
