"""Offset planning and option parsing, without Spark or a broker."""

from __future__ import annotations

import pytest

from odradek.spark.options import OptionError, parse_read_options, parse_write_options
from odradek.spark.reader import limit_offsets, offsets_from_json, offsets_to_json, plan_ranges

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_limit_offsets_shares_in_proportion_and_exactly():
    begin = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    latest = {("t", 0): 100, ("t", 1): 10, ("t", 2): 55}
    end = limit_offsets(begin, latest, 31)
    assert sum(end[tp] - begin[tp] for tp in begin) == 31
    assert end[("t", 1)] == 10 and end[("t", 0)] - 0 > end[("t", 2)] - 5
    assert limit_offsets(begin, latest, 1000) == latest


def test_plan_ranges_splits_for_min_partitions():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 7}
    end = {("t", 0): 100, ("t", 1): 10, ("t", 2): 7}
    parts = plan_ranges(start, end, 8)
    assert len(parts) >= 8
    covered = sorted((p.topic, p.partition, o) for p in parts for o in range(p.start, p.end))
    assert covered == sorted([("t", 0, o) for o in range(100)] + [("t", 1, o) for o in range(10)])
    assert len(plan_ranges(start, end, None)) == 2  # empty ranges get no task


def test_offsets_json_round_trip_is_stable():
    offs = {("b", 10): 3, ("a", 2): 1, ("a", 10): 5}
    j = offsets_to_json(offs)
    assert list(j) == ["a", "b"] and list(j["a"]) == ["2", "10"]
    assert offsets_from_json(j) == offs


def test_read_option_errors():
    with pytest.raises(OptionError, match="bootstrap"):
        parse_read_options({"subscribe": "t"}, streaming=True)
    with pytest.raises(OptionError, match="batch"):
        parse_read_options({**BOOT, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="auto.offset.reset"):
        parse_read_options({**BOOT, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, streaming=True)
    o = parse_read_options({**BOOT, "SUBSCRIBEPATTERN": "a.*", "startingTimestamp": "5",
                            "startingOffsets": "earliest"}, streaming=True)
    assert o.subscription.kind == "pattern" and o.starting.kind == "timestamp"
    assert parse_read_options({**BOOT, "subscribe": "t"}, streaming=True).starting.kind == "latest"
    assert parse_read_options({**BOOT, "subscribe": "t"}, streaming=False).starting.kind == "earliest"


def test_write_options():
    assert parse_write_options({**BOOT, "topic": "x"}, streaming=True).exactly_once == "true"
    assert parse_write_options({**BOOT, "topic": "x"}, streaming=False).exactly_once == "false"
    with pytest.raises(OptionError, match="streaming writes only"):
        parse_write_options({**BOOT, "exactlyOnce": "true"}, streaming=False)
