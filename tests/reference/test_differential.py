"""Each scenario (scenarios.py) sent to Apache Kafka and to odradek; the normalised answers must be identical.

A failing case prints the differences field by field (path: kafka value vs odradek value); differing error
messages are printed too but never fail a case. `tests/reference/report.py` runs them all and summarises.
"""

from __future__ import annotations

import secrets
import time

import pytest

from .conftest import report_line
from .differential import Broker, Connection, compare
from .scenarios import SCENARIOS
from .scenarios_configs import SCENARIOS_CONFIGS
from .scenarios_kip848 import SCENARIOS_KIP848
from .scenarios_share import SCENARIOS_SHARE
from .scenarios_streams import SCENARIOS_STREAMS

SCENARIOS = [*SCENARIOS, *SCENARIOS_KIP848, *SCENARIOS_CONFIGS, *SCENARIOS_SHARE, *SCENARIOS_STREAMS]

RUN_TOKEN = secrets.token_hex(2)  # in every name a scenario creates, so reruns against a live Kafka don't clash


WARM_UP_S = 60.0


def warm_up_coordinators(bootstrap: str) -> None:
    """Until FindCoordinator (which creates the internal topics), a transactional InitProducerId and an
    OffsetFetch succeed: the coordinators have loaded their partitions. Kafka finds a coordinator before it
    has loaded its partition, so a scenario that ran first would otherwise see NOT_COORDINATOR there."""
    calls = [(10, 3, {"key": f"warm-up-{RUN_TOKEN}", "key_type": 1}, lambda r: r["error_code"]),
             (10, 3, {"key": f"warm-up-{RUN_TOKEN}", "key_type": 0}, lambda r: r["error_code"]),
             (22, 3, {"transactional_id": f"warm-up-{RUN_TOKEN}", "transaction_timeout_ms": 60000,
                      "producer_id": -1, "producer_epoch": -1}, lambda r: r["error_code"]),
             (9, 7, {"group_id": f"warm-up-{RUN_TOKEN}", "topics": None, "require_stable": False},
              lambda r: r["error_code"])]
    deadline = time.monotonic() + WARM_UP_S
    for api_key, version, body, error in calls:
        while True:
            conn = Connection(bootstrap)
            try:
                code = error(conn.request(api_key, version, body))
            finally:
                conn.close()
            if code == 0:
                break
            assert time.monotonic() < deadline, f"{bootstrap}: API {api_key} still answers error {code}"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def brokers(kafka_reference, odradek) -> tuple[Broker, Broker]:
    for bootstrap in (kafka_reference.bootstrap, odradek.bootstrap):
        warm_up_coordinators(bootstrap)
    return Broker.probe("kafka", kafka_reference.bootstrap), Broker.probe("odradek", odradek.bootstrap)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_same_answer(brokers, scenario):
    kafka, odradek = brokers
    outcome = compare(scenario, kafka, odradek, RUN_TOKEN)
    report_line(outcome.as_dict())
    if not outcome.identical:
        pytest.fail(outcome.explain(), pytrace=False)
