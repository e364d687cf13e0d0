"""ShareFetch and ShareAcknowledge v2 (Kafka 4.2+) with raw requests: the acquire modes (KIP-1206), renew
acknowledgements (KIP-1222), and what a malformed v2 request gets."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode
from tests.interop.test_broker_semantics import request
from tests.interop.test_share_groups import LOCK_MS, prepared_group

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
ACCEPT, RENEW = 1, 4


def joined(bootstrap: str, group: str, topic: str, member: str) -> bytes:
    """``member`` joins ``group``; the topic's id."""
    answer = request(bootstrap, SHARE_GROUP_HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": 0,
                                                           "rack_id": None, "subscribed_topic_names": [topic]})
    assert answer["error_code"] == 0
    return answer["assignment"]["topic_partitions"][0]["topic_id"]


def fetch_body(group: str, member: str, topic_id: bytes, epoch: int = 0, max_records: int = 500, mode: int = 0,
               acks: list[dict] | None = None, renew: bool = False, **fields: int) -> dict:
    body = {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 500,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records,
            "share_acquire_mode": mode, "is_renew_ack": renew,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0,
                                                              "acknowledgement_batches": acks or []}]}],
            "forgotten_topics_data": []}
    body.update(fields)
    return body


def ack_body(group: str, member: str, topic_id: bytes, epoch: int, first: int, last: int, kind: int,
             renew: bool) -> dict:
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "is_renew_ack": renew,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}]}]}]}


def acquired(answer: dict) -> list[tuple[int, int, int]]:
    return [(r["first_offset"], r["last_offset"], r["delivery_count"])
            for t in answer["responses"] for p in t["partitions"] for r in p["acquired_records"]]


def partition_errors(answer: dict) -> list[int]:
    return [p["error_code"] for t in answer["responses"] for p in t["partitions"]]


def test_batch_optimized_acquires_the_whole_batch_record_limit_stops_at_the_limit(broker, topic_name):
    """Six records in one stored batch: asked for two, v1 and v2's batch-optimized mode hand out all six;
    record-limit mode exactly two, then the next two."""
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 6)
    topic_id = joined(bootstrap, group, topic_name, "member-a")
    joined(bootstrap, group, topic_name, "member-b")
    joined(bootstrap, group, topic_name, "member-c")
    first = request(bootstrap, SHARE_FETCH, 2, fetch_body(group, "member-a", topic_id, max_records=2, mode=1))
    assert first["error_code"] == 0 and acquired(first) == [(0, 1, 1)]
    second = request(bootstrap, SHARE_FETCH, 2, fetch_body(group, "member-b", topic_id, max_records=2, mode=1))
    assert acquired(second) == [(2, 3, 1)]
    rest = request(bootstrap, SHARE_FETCH, 1, fetch_body(group, "member-c", topic_id, max_records=1))
    assert acquired(rest) == [(4, 5, 1)]  # batch-optimized (v1's only mode): the rest of the batch


def test_renew_keeps_records_acquired(broker, topic_name):
    """A renew (type 4) needs is_renew_ack; with it the records stay the member's (another member gets none of
    them), and the member can still accept them afterwards."""
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 4)
    topic_id = joined(bootstrap, group, topic_name, "member-a")
    joined(bootstrap, group, topic_name, "member-b")
    got = request(bootstrap, SHARE_FETCH, 2, fetch_body(group, "member-a", topic_id, max_records=2, mode=1))
    assert acquired(got) == [(0, 1, 1)]
    refused = request(bootstrap, SHARE_ACKNOWLEDGE, 2, ack_body(group, "member-a", topic_id, 1, 0, 1, RENEW, False))
    assert refused["error_code"] == 0 and partition_errors(refused) == [ErrorCode.INVALID_REQUEST]
    renewed = request(bootstrap, SHARE_ACKNOWLEDGE, 2, ack_body(group, "member-a", topic_id, 2, 0, 1, RENEW, True))
    assert renewed["error_code"] == 0 and partition_errors(renewed) == [0]
    assert renewed["acquisition_lock_timeout_ms"] == LOCK_MS
    other = request(bootstrap, SHARE_FETCH, 2, fetch_body(group, "member-b", topic_id, max_records=10, mode=1))
    assert acquired(other) == [(2, 3, 1)]
    done = request(bootstrap, SHARE_ACKNOWLEDGE, 2, ack_body(group, "member-a", topic_id, 3, 0, 1, ACCEPT, False))
    assert partition_errors(done) == [0]


def test_renew_in_share_fetch_only_acknowledges(broker, topic_name):
    """A ShareFetch with is_renew_ack applies the renew and fetches nothing; it must ask for nothing."""
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 4)
    topic_id = joined(bootstrap, group, topic_name, "member-a")
    got = request(bootstrap, SHARE_FETCH, 2, fetch_body(group, "member-a", topic_id, max_records=2, mode=1))
    assert acquired(got) == [(0, 1, 1)]
    renew_acks = [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [RENEW]}]
    asking = request(bootstrap, SHARE_FETCH, 2, fetch_body(group, "member-a", topic_id, epoch=1, max_records=2,
                                                            acks=renew_acks, renew=True))
    assert asking["error_code"] == ErrorCode.INVALID_REQUEST
    quiet = fetch_body(group, "member-a", topic_id, epoch=1, acks=renew_acks, renew=True, max_wait_ms=0,
                       min_bytes=0, max_bytes=0, max_records=0, batch_size=0)
    answer = request(bootstrap, SHARE_FETCH, 2, quiet)
    assert answer["error_code"] == 0 and acquired(answer) == []
    assert [p["acknowledge_error_code"] for t in answer["responses"] for p in t["partitions"]] == [0]


def test_unknown_acquire_mode_is_invalid_request(broker, topic_name):
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 1)
    topic_id = joined(bootstrap, group, topic_name, "member-a")
    for mode in (2, -1, 127):
        answer = request(bootstrap, SHARE_FETCH, 2, fetch_body(group, "member-a", topic_id, mode=mode))
        assert answer["error_code"] == ErrorCode.INVALID_REQUEST and answer["responses"] == []
    # the session was never opened: a proper v2 fetch opens it
    assert acquired(request(bootstrap, SHARE_FETCH, 2, fetch_body(group, "member-a", topic_id))) == [(0, 0, 1)]
