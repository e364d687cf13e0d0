"""`odradek cluster describe` against a running broker (a single node: broker 0, the controller of itself)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from odradek import cli
from odradek.tools import cluster as cluster_tool
from odradek.tools.cluster import ClusterView, PartitionState
from tests.conftest import free_port

pytest.importorskip("confluent_kafka")
from tests.interop.test_groups_confluent import create_topic, produce_spread  # noqa: E402


def describe(*args: str, rc: int = 0) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", "cluster", "describe", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == rc, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout, proc.stderr


def table_rows(output: str) -> list[list[str]]:
    """The body rows of rich's tables: the cells between the vertical rules."""
    return [[cell.strip() for cell in line.strip().strip("│").split("│")]
            for line in output.splitlines() if line.startswith("│")]


def test_describe_single_node(broker_factory, topic_name):
    broker = broker_factory({"num.partitions": "1"})
    create_topic(broker.bootstrap, topic_name, 3)
    produce_spread(broker.bootstrap, topic_name, 3, 4)
    out, _ = describe("--bootstrap", broker.bootstrap)
    assert "controller 0" in out
    rows = table_rows(out)
    assert ["0", broker.bootstrap, "*"] in [r[:3] for r in rows]
    broker_row = next(r for r in rows if r[0] == "0")
    assert broker_row[3] == "-" and broker_row[4].endswith("B")  # no rack; its logs' size (DescribeLogDirs)
    assert [r for r in rows if r[0] == topic_name] == [[topic_name, str(p), "0", "0", "0", "ok"] for p in range(3)]
    assert not any(r[0].startswith("__") for r in rows)  # internal topics only on request
    assert "3 partitions: 0 under-replicated, 0 offline" in out

    out, _ = describe("--bootstrap", broker.bootstrap, "--include-internal")
    assert any(r[0] == "__consumer_offsets" for r in table_rows(out))

    out, _ = describe("--bootstrap", broker.bootstrap, "--topic", topic_name, "--topic", "no-such-topic")
    assert {r[0] for r in table_rows(out) if len(r) == 6 and not r[0].isdigit()} == {topic_name}  # not brokers
    assert "topic no-such-topic:" in out
    out, _ = describe("--bootstrap", broker.bootstrap)
    assert "no-such-topic" not in out  # describing a topic never creates it
    assert "3 partitions: 0 under-replicated, 0 offline" in out


def test_describe_unreachable_bootstrap_exits_1():
    _, err = describe("--bootstrap", f"127.0.0.1:{free_port()}", "--timeout", "1", rc=1)
    assert "cannot reach" in err


def test_describe_marks_under_replicated_and_offline(monkeypatch, capsys):
    partitions = {
        0: PartitionState("t", 0, 1, (1, 2, 3), (1, 2, 3)),
        1: PartitionState("t", 1, 2, (2, 3, 1), (2, 3)),
        2: PartitionState("t", 2, -1, (3, 1, 2), (3,), "LEADER_NOT_AVAILABLE"),
    }
    view = ClusterView("cid", 2, {1: ("h1", 9092), 2: ("h2", 9092), 3: ("h3", 9092)}, {"t": partitions}, {})
    monkeypatch.setattr(cluster_tool, "describe_cluster", lambda bootstrap, timeout, topics, config=None: view)
    assert cli.main(["cluster", "describe", "--bootstrap", "h1:9092"]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert ["2", "h2:9092", "*"] in [r[:3] for r in rows] and ["1", "h1:9092", ""] in [r[:3] for r in rows]
    assert ["t", "1", "2", "2,3,1", "2,3", "under-replicated"] in rows
    assert ["t", "2", "none", "3,1,2", "3", "offline"] in rows
    assert "3 partitions: 1 under-replicated, 1 offline" in out
