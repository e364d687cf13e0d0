"""KAFKA07 listeners in the listener setup (net/listeners.py): kept apart from the Kafka listeners."""

from __future__ import annotations

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.net.listeners import listener_setup


def test_kafka07_listener_is_kept_apart() -> None:
    setup = listener_setup(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,KAFKA07://127.0.0.1:9091"}))
    assert [b.name for b in setup.bind] == ["PLAINTEXT"]
    assert [a.name for a in setup.advertised] == ["PLAINTEXT"]
    assert [(b.name, b.security_protocol, b.port) for b in setup.legacy07] == [("KAFKA07", "KAFKA07", 9091)]
    assert setup.inter_broker == "PLAINTEXT"
    assert setup.with_bound_ports({"PLAINTEXT": 1}).legacy07 == setup.legacy07


def test_kafka07_listener_by_another_name_and_magic() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://:9092,OLD://127.0.0.1:9090",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OLD:KAFKA07",
                           "listener.name.old.legacy.message.magic": "0"})
    setup = listener_setup(config)
    assert [b.name for b in setup.legacy07] == ["OLD"]
    assert config.for_listener("OLD", "legacy.message.magic") == 0
    assert config.for_listener("PLAINTEXT", "legacy.message.magic") == 1


def test_kafka07_alone_or_inter_broker_is_refused() -> None:
    with pytest.raises(ConfigError, match="no listener"):
        listener_setup(BrokerConfig({"listeners": "KAFKA07://127.0.0.1:9091"}))
    with pytest.raises(ConfigError, match="inter.broker.listener.name"):
        listener_setup(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,KAFKA07://127.0.0.1:9091",
                                     "inter.broker.listener.name": "KAFKA07"}))
    with pytest.raises(ConfigError):
        BrokerConfig({"listener.name.old.legacy.message.magic": "2"})
