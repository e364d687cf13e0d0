"""Fixtures of the differential tests: Apache Kafka, the reference (one per session), and an odradek broker;
for the authorization parity suite a secured pair of them (one per module: SASL/PLAIN, ACLs).

Kafka comes from `make reference` (reference/install.sh; a cache outside the repository) and is started by
reference/kafka.py, loaded here by path under its own module name. Without an install or without Java the
tests skip with the reason; under CI (`CI` set) that is a failure, except when the install could not reach
Maven's repository (the install script records so in its marker file).

With ODRADEK_DIFFERENTIAL_REPORT=PATH every outcome is appended to PATH as a JSON line (report.py uses it),
and so is Kafka's start time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

from tests.conftest import BrokerProcess, free_port
from tests.security.test_acls import JAAS

from .authz_cases import BROKER_NODE_ID

LAUNCHER = Path(__file__).resolve().parents[2] / "reference" / "kafka.py"
# The settings reference/kafka.py gives Kafka that odradek knows, given to odradek too: the same values, and
# both brokers then report them as static broker configs.
ODRADEK_SETTINGS = {"num.partitions": "1", "auto.create.topics.enable": "true", "group.initial.rebalance.delay.ms": "0",
                    "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                    "transaction.state.log.min.isr": "1"}


# The secured pair of the authorization parity suite (test_authz_differential.py): the same users (PLAIN),
# Kafka's StandardAuthorizer, admin a super user, nothing allowed where no ACL says so, no auto-creation;
# odradek's one transaction state partition (Kafka's default is 50), so that both list the same partitions.
SECURED_COMMON = {"sasl.enabled.mechanisms": "PLAIN", "transaction.state.log.num.partitions": "1",
                  "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                  "allow.everyone.if.no.acl.found": "false", "auto.create.topics.enable": "false"}


def load_launcher() -> ModuleType:
    name = "odradek_reference_kafka"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, LAUNCHER)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _unavailable(reason: str, unreachable: bool = False) -> None:
    if os.environ.get("CI") and not unreachable:
        pytest.fail(f"the Kafka reference must run in CI: {reason}")
    pytest.skip(reason)


def installed_launcher() -> tuple[ModuleType, Path]:
    """reference/kafka.py and the installed Kafka's libs, or the test skipped (failed under CI) with the reason."""
    ref = load_launcher()
    status = ref.install_status()
    if not status.installed:
        _unavailable(status.reason, status.unreachable)
    if shutil.which("java") is None:
        _unavailable("java not found (tools/install-system-deps.sh installs a JDK)")
    return ref, status.libs


def report_line(record: dict) -> None:
    path = os.environ.get("ODRADEK_DIFFERENTIAL_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


@pytest.fixture(scope="session")
def kafka_reference() -> Iterator:
    """Apache Kafka as a single-node KRaft broker on a free loopback port, for the whole session."""
    ref, libs = installed_launcher()
    kafka = ref.KafkaReference(libs)
    try:
        kafka.start()
    except RuntimeError as exc:
        kafka.stop()
        pytest.fail(f"Apache Kafka {ref.kafka_version()} did not start: {exc}")
    report_line({"kafka_version": ref.kafka_version(), "kafka_start_seconds": round(kafka.start_seconds, 2),
                 "kafka_format_seconds": round(kafka.format_seconds, 2)})
    yield kafka
    kafka.stop()


@pytest.fixture(scope="module")
def secured_kafka() -> Iterator:
    """Apache Kafka with a SASL_PLAINTEXT listener (PLAIN: admin, alice, bob) and the StandardAuthorizer
    (tests/security/secured_kafka.py), with the settings the secured odradek shares. `kafka.sasl_bootstrap` is
    where the cases go."""
    from tests.security.secured_kafka import secured_kafka as start_secured_kafka

    for kafka in start_secured_kafka(SECURED_COMMON):
        report_line({"kafka_version": load_launcher().kafka_version(),
                     "kafka_start_seconds": round(kafka.start_seconds, 2), "secured": True})
        yield kafka


@pytest.fixture(scope="module")
def secured_odradek(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """odradek with the same users, authorizer and super user as secured_kafka, on a SASL_PLAINTEXT listener
    (`broker.sasl_bootstrap`) beside a PLAINTEXT one, as node 1 like the reference."""
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(tmp_path_factory.mktemp("odradek-authz") / "data", {
        **ODRADEK_SETTINGS, **SECURED_COMMON, "node.id": str(BROKER_NODE_ID),
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "super.users": "User:admin"}, port=plain)
    broker.sasl_bootstrap = f"127.0.0.1:{sasl}"
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def odradek(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("odradek-reference") / "data", ODRADEK_SETTINGS)
    broker.args += ["--advertise", broker.bootstrap]  # Kafka's advertised.listeners is set too: both static
    broker.start()
    yield broker
    broker.stop()
