"""`odradek groups list|describe|delete|reset-offsets` against a running broker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .test_groups_clients import committed_offsets
from .test_groups_confluent import create_topic, group_consumer, poll_all, produce_spread

pytest.importorskip("confluent_kafka")


def cli(broker, *args: str, rc: int = 0) -> str:
    proc = subprocess.run([sys.executable, "-m", "odradek", "groups", *args, "--bootstrap", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == rc, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def test_groups_cli_end_to_end(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    produce_spread(broker.bootstrap, topic_name, 2, 5)
    group = f"g-{topic_name}"
    c = group_consumer(broker.bootstrap, group, **{"enable.auto.offset.store": True})
    c.subscribe([topic_name])
    try:
        poll_all([c], lambda got: len(got[0]) >= 10)
        c.commit(asynchronous=False)
        out = cli(broker, "list")
        assert any(line.split()[:2] == [group, "STABLE"] for line in out.splitlines())
        out = cli(broker, "describe", group)
        assert "STABLE" in out and f"{topic_name}:0,{topic_name}:1" in out
        lag_rows = [line.split() for line in out.splitlines() if line.startswith(topic_name + " ")]
        assert [(r[1], r[2], r[3], r[4]) for r in lag_rows] == [("0", "5", "5", "0"), ("1", "5", "5", "0")]
        # while the member is active the broker refuses the reset
        cli(broker, "reset-offsets", group, "--topic", topic_name, "--to-earliest", "--execute", rc=1)
        assert cli(broker, "delete", group, rc=1)
    finally:
        c.close()
    out = cli(broker, "reset-offsets", group, "--topic", topic_name, "--to-offset", "2")
    assert "dry run" in out
    assert committed_offsets(broker.bootstrap, group, topic_name, 2) == {0: 5, 1: 5}
    cli(broker, "reset-offsets", group, "--topic", topic_name, "--to-offset", "2", "--execute")
    assert committed_offsets(broker.bootstrap, group, topic_name, 2) == {0: 2, 1: 2}
    cli(broker, "reset-offsets", group, "--topic", topic_name, "--to-latest", "--execute")
    assert committed_offsets(broker.bootstrap, group, topic_name, 2) == {0: 5, 1: 5}
    out = cli(broker, "describe", group)
    assert "EMPTY" in out
    cli(broker, "delete", group)
    assert group not in cli(broker, "list")
    assert committed_offsets(broker.bootstrap, group, topic_name, 2) == {}
    cli(broker, "reset-offsets", group, "--topic", "no-such-topic-xyz", "--to-earliest", rc=1)
