"""Client telemetry (KIP-714) as Apache Kafka 4.4 answers it without a telemetry plugin: GetTelemetrySubscriptions
and PushTelemetry are answered but not advertised, no metric is requested, pushes are checked and dropped.

The sequence below is the one sent to Kafka 4.4 (reference/kafka.py) when this was written, with the same
answers; the time-dependent rules are checked in virtual time at the end.
"""

from __future__ import annotations

import uuid

from odradek.broker.client_telemetry import ClientTelemetry
from odradek.protocol.errors import ErrorCode
from tests.interop.test_broker_semantics import request

GET, PUSH = 71, 72


def push(bootstrap: str, instance: bytes, subscription: int, **fields) -> int:
    body = {"client_instance_id": instance, "subscription_id": subscription, "terminating": False,
            "compression_type": 0, "metrics": b"", **fields}
    return request(bootstrap, PUSH, 0, body)["error_code"]


def test_not_advertised_but_answered_with_no_requested_metrics(broker) -> None:
    keys = {k["api_key"] for k in request(broker.bootstrap, 18, 3, {"client_software_name": "t",
                                                                    "client_software_version": "1"})["api_keys"]}
    assert GET not in keys and PUSH not in keys and 68 in keys
    first = request(broker.bootstrap, GET, 0, {"client_instance_id": bytes(16)})
    assert first["error_code"] == 0
    instance = first["client_instance_id"]
    assert instance != bytes(16)
    assert first["requested_metrics"] == []
    assert first["accepted_compression_types"] == [4, 3, 1, 2]
    assert (first["push_interval_ms"], first["telemetry_max_bytes"], first["delta_temporality"]) == (300000, 1048576, True)
    again = request(broker.bootstrap, GET, 0, {"client_instance_id": instance})
    assert again["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    subscription = first["subscription_id"]
    assert push(broker.bootstrap, instance, subscription) == 0  # the first push after a Get
    assert push(broker.bootstrap, instance, subscription) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert push(broker.bootstrap, instance, subscription + 1) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert push(broker.bootstrap, uuid.uuid4().bytes, subscription) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert push(broker.bootstrap, bytes(16), subscription) == ErrorCode.INVALID_REQUEST
    assert push(broker.bootstrap, instance, subscription, terminating=True) == 0
    assert push(broker.bootstrap, instance, subscription) == ErrorCode.INVALID_REQUEST


def test_push_checks_in_virtual_time() -> None:
    telemetry = ClientTelemetry(max_bytes=100, push_interval_ms=1000)
    got = telemetry.subscriptions(bytes(16), now_ms=0)
    instance, subscription = got["client_instance_id"], got["subscription_id"]
    assert telemetry.push(instance, subscription, False, 0, b"", now_ms=10) == 0
    assert telemetry.push(instance, subscription, False, 0, b"", now_ms=500) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert telemetry.push(instance, subscription + 1, False, 0, b"", now_ms=1100) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert telemetry.push(instance, subscription, False, 9, b"", now_ms=2200) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert telemetry.push(instance, subscription, False, 4, b"x" * 101, now_ms=3300) == ErrorCode.TELEMETRY_TOO_LARGE
    assert telemetry.push(instance, subscription, False, 4, b"x" * 100, now_ms=4400) == 0
    assert telemetry.subscriptions(instance, now_ms=4500)["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert telemetry.subscriptions(instance, now_ms=5400)["subscription_id"] == subscription
    # forgotten after three push intervals without a word
    assert telemetry.push(instance, subscription, False, 0, b"", now_ms=9000) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
