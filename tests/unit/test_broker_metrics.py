"""broker/metrics.py without a broker: error counting in response bodies, histograms, Kafka's request names,
and the metrics.listen property's check."""

from __future__ import annotations

from odradek.broker.metrics import FETCH_FOLLOWER, Histogram, count_errors, request_name
from odradek.config import BROKER_PROPERTIES
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, error_name


def test_count_errors_walks_topics_and_partitions_not_records():
    body = {"error_code": 0, "throttle_time_ms": 0, "responses": [
        {"topic": "a", "partitions": [
            {"partition_index": 0, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "records": [b"x" * 10]},
            {"partition_index": 1, "error_code": 0, "aborted_transactions": None, "records": b""}]},
        {"topic": "b", "partitions": [
            {"partition_index": 0, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER},
            {"partition_index": 1, "error_code": ErrorCode.OFFSET_OUT_OF_RANGE}]}]}
    errors: dict = {}
    count_errors(body, errors, (1, 12))
    assert errors == {(1, 12, ErrorCode.NOT_LEADER_OR_FOLLOWER): 2, (1, 12, ErrorCode.OFFSET_OUT_OF_RANGE): 1}
    count_errors({"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}, errors, (10, 4))
    assert errors[(10, 4, ErrorCode.COORDINATOR_NOT_AVAILABLE)] == 1


def test_histogram_is_cumulative_with_inf():
    h = Histogram((1.0, 10.0))
    for v in (0.5, 1.0, 5.0, 50.0):
        h.observe(v)
    buckets, total = h.cumulative()
    assert buckets == [("1.0", 2), ("10.0", 3), ("+Inf", 4)]
    assert total == 56.5


def test_names():
    assert request_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert request_name(ApiKey.OFFSET_COMMIT) == "OffsetCommit"
    assert request_name(ApiKey.LEADER_AND_ISR) == "LeaderAndIsr"
    assert request_name(ApiKey.FETCH) == "FetchConsumer"
    assert request_name(FETCH_FOLLOWER) == "FetchFollower"
    assert error_name(ErrorCode.NOT_LEADER_OR_FOLLOWER) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(9999) == "error 9999"


def test_metrics_listen_property():
    prop = BROKER_PROPERTIES["metrics.listen"]
    assert prop.default == ""
    assert prop.doc
    for good in ("", "127.0.0.1:9404", "0.0.0.0:0", "[::1]:9404"):
        assert prop.check(good), good
    for bad in ("9404x", "localhost", "host:99999"):
        assert not prop.check(bad), bad
