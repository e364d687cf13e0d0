"""Each scenario (scenarios.py) sent to Apache Kafka and to odradek; the normalised answers must be identical.

A failing case prints the differences field by field (path: kafka value vs odradek value); differing error
messages are printed too but never fail a case. `tests/reference/report.py` runs them all and summarises.
"""

from __future__ import annotations

import secrets

import pytest

from .conftest import report_line
from .differential import Broker, compare
from .scenarios import SCENARIOS

RUN_TOKEN = secrets.token_hex(2)  # in every name a scenario creates, so reruns against a live Kafka don't clash


@pytest.fixture(scope="module")
def brokers(kafka_reference, odradek) -> tuple[Broker, Broker]:
    return Broker.probe("kafka", kafka_reference.bootstrap), Broker.probe("odradek", odradek.bootstrap)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_same_answer(brokers, scenario):
    kafka, odradek = brokers
    outcome = compare(scenario, kafka, odradek, RUN_TOKEN)
    report_line(outcome.as_dict())
    if not outcome.identical:
        pytest.fail(outcome.explain(), pytrace=False)
