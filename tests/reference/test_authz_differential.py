"""Authorization parity with Apache Kafka 4.4: every API either broker advertises, at its lowest, a middle
and its highest common version, as admin, alice and bob, against a secured Kafka and a secured odradek with
the same users and ACLs (authz_cases.py); the outcomes (error codes, names listed, authorized operations,
a closed connection) must be the same, but for the deliberate differences of known.py's KNOWN_AUTHZ.

All cases run once, in one order, in the module's fixture (they share connections, and some change state
both brokers then share); each test then checks one API's cases, so a failure names the API and lists
`case: path: kafka X vs odradek Y`. `python -m tests.reference.report_authz` prints the whole table.
"""

from __future__ import annotations

import pytest

from odradek.protocol.errors import ErrorCode

from .authz import API_NAMES, AuthzOutcome, Side, per_case_topics, permissive, prepare, probe, refused, run_all
from .authz_cases import CASES, NOT_SENT
from .conftest import report_line
from .differential import ABSENT, Difference


@pytest.fixture(scope="module")
def authz_outcomes(secured_kafka, secured_odradek) -> list[AuthzOutcome]:
    kafka, odradek = Side("kafka", secured_kafka.sasl_bootstrap), Side("odradek", secured_odradek.sasl_bootstrap)
    try:
        probe(kafka)
        probe(odradek)
        topics = per_case_topics(kafka.versions, odradek.versions)
        prepare(kafka, topics)
        prepare(odradek, topics)
        outcomes = []
        for outcome in run_all(kafka, odradek):
            report_line(outcome.as_dict())
            outcomes.append(outcome)
    finally:
        kafka.close()
        odradek.close()
    equal = sum(1 for o in outcomes if o.equal)
    known = sum(1 for o in outcomes if not o.differences and o.known)
    report_line({"authz_summary": True, "cases": len(outcomes), "equal": equal, "deliberate": known,
                 "different": len(outcomes) - equal - known})
    return outcomes


def explain(outcomes: list[AuthzOutcome]) -> str:
    lines = []
    for o in outcomes:
        for d in o.differences:
            flag = " (PERMISSIVE: odradek allows or shows more)" if o.permissive(d) else ""
            lines.append(f"{o.case.id}: {d}{flag}")
    return "\n".join(lines)


APIS = sorted(k for k in CASES if k not in NOT_SENT)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("api", APIS, ids=[f"{API_NAMES.get(k, k)}" for k in APIS])
def test_same_authorization_outcome(authz_outcomes, api):
    mine = [o for o in authz_outcomes if o.case.api == api]
    if not mine:
        pytest.skip(f"neither broker advertises API {api} (or the codec knows none of its versions)")
    different = [o for o in mine if o.differences]
    if different:
        pytest.fail(f"{len(different)} of {len(mine)} cases differ:\n{explain(different)}", pytrace=False)


@pytest.mark.timeout(400)
def test_every_user_was_compared(authz_outcomes):
    """The run reached each user on both brokers with allowed and denied answers: the suite cannot pass by
    comparing nothing."""
    assert len(authz_outcomes) >= 300
    for principal in ("admin", "alice", "bob"):
        theirs = [o for o in authz_outcomes if o.case.principal == principal]
        assert any(o.equal for o in theirs), principal
    denied = [o for o in authz_outcomes if o.case.principal == "alice" and o.kafka == o.odradek
              and refused(o.kafka)]
    assert denied, "alice was never refused: the ACLs did not apply"


@pytest.mark.timeout(400)
def test_odradek_never_more_lenient(authz_outcomes):
    """No case where odradek allows what Kafka refuses, or shows what Kafka hides (such a difference can never
    be deliberate)."""
    lenient = [f"{o.case.id}: {d}" for o in authz_outcomes for d in o.differences if o.permissive(d)]
    assert not lenient, f"{len(lenient)} differences where odradek is more lenient:\n" + "\n".join(lenient)


def test_lenience_is_recognised():
    """The detector behind test_odradek_never_more_lenient, on differences of the kinds the suite has met."""
    denied, lists = ErrorCode.TOPIC_AUTHORIZATION_FAILED, {"topics": []}
    assert permissive(Difference("responses[name=x].error_code", denied, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), lists)
    assert not permissive(Difference("error_code", ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                     ErrorCode.UNSUPPORTED_VERSION), {"error_code": 35})
    assert permissive(Difference("topics[name=x]", ABSENT, {"name": "x"}), lists)  # a name Kafka hides
    refused_entry = {"name": "x", "partitions": [{"partition_index": 0, "error_code": 30}]}
    assert permissive(Difference("topics[name=x]", refused_entry, ABSENT), lists)  # an empty success
    assert not permissive(Difference("topics[name=x]", refused_entry, ABSENT), {"error_code": 30, "topics": []})
    assert permissive(Difference("cluster_authorized_operations", 0, 4096), {})
    assert not permissive(Difference("authorized_operations", 3400, 328), {})  # fewer operations than Kafka's
