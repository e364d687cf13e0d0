"""Apache Kafka 4.4 secured like tests/security/test_acls.py's SecuredBroker, for tests that compare answers.

The same users (admin, alice, bob with the same PLAIN passwords) on a SASL_PLAINTEXT listener, Kafka's KRaft
authorizer (`org.apache.kafka.metadata.authorizer.StandardAuthorizer`), `super.users` with admin and
`allow.everyone.if.no.acl.found=false`. The broker's own PLAINTEXT listener (reference/kafka.py's readiness
probe, inter-broker traffic) and the controller listener stay unauthenticated, so their principal
User:ANONYMOUS is a super user too: KRaft's broker registration and heartbeats need CLUSTER_ACTION on the
controller. Tests talk to the SASL port only.

`secured_kafka()` skips (or fails under CI) like tests/reference/conftest.py when Kafka is not installed.
"""

from __future__ import annotations

import shutil
from typing import Iterator

import pytest

from tests.reference.conftest import _unavailable, load_launcher
from tests.security.test_acls import JAAS

SASL_LISTENER = "SASL_PLAINTEXT"
# A start took over 60 s once with the machine's load average at 23 (several suites on two cores)
START_TIMEOUT_S = 120.0


class SecuredKafka:
    """One Kafka process with a PLAIN SASL listener and ACLs on; `sasl` is that listener's port and
    `sasl_bootstrap` its address. ``settings`` add to (or replace) the secured ones."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        ref = load_launcher()
        self.sasl = ref.free_port()
        self.sasl_bootstrap = f"127.0.0.1:{self.sasl}"
        port, controller = ref.free_port(), ref.free_port()
        secured = {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},{SASL_LISTENER}://127.0.0.1:{self.sasl},"
                         f"CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},{SASL_LISTENER}://127.0.0.1:{self.sasl}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                              f"{SASL_LISTENER}:{SASL_LISTENER}",
            "sasl.enabled.mechanisms": "PLAIN",
            f"listener.name.{SASL_LISTENER.lower()}.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
            "auto.create.topics.enable": "false",
        }
        self.kafka = ref.KafkaReference(port=port, controller_port=controller, settings={**secured, **(settings or {})})

    @property
    def start_seconds(self) -> float:
        return self.kafka.start_seconds

    def start(self, timeout: float = START_TIMEOUT_S) -> "SecuredKafka":
        self.kafka.start(timeout=timeout)
        return self

    def stop(self) -> None:
        self.kafka.stop()

    def log_tail(self) -> str:
        return self.kafka.log_tail()


def secured_kafka(settings: dict[str, str] | None = None) -> Iterator[SecuredKafka]:
    """A generator for a fixture: a started SecuredKafka, stopped afterwards."""
    ref = load_launcher()
    status = ref.install_status()
    if not status.installed:
        _unavailable(status.reason, status.unreachable)
    if shutil.which("java") is None:
        _unavailable("java not found (tools/install-system-deps.sh installs a JDK)")
    kafka = SecuredKafka(settings)
    try:
        kafka.start()
    except RuntimeError as exc:
        kafka.stop()
        pytest.fail(f"Apache Kafka {ref.kafka_version()} (secured) did not start: {exc}")
    yield kafka
    kafka.stop()
