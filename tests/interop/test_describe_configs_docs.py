"""DescribeConfigs' `include_documentation` (v3+): every topic config and every broker property odradek lists
carries its own short text when asked, and null when not.

The texts live beside the definitions in config.py (`Property.doc`, `TopicConfig.doc`); the first tests check
that none is missing. Then a real broker process is asked over a raw socket (odradek's codec) at v3 and v4,
with and without documentation, for a topic and for the broker, and through kafka-python's own protocol
classes and network client (an independent encoder and decoder of the request and response). kafka-python's
`KafkaAdminClient.describe_configs` has no documentation option, so the request is built from its
`DescribeConfigsRequest` and sent with its `KafkaNetClient`.
"""

from __future__ import annotations

import pytest

from odradek.config import BROKER_PROPERTIES, BrokerConfig, broker_property_doc
from odradek.topic_config import TOPIC_CONFIGS, topic_config_doc
from tests.interop.test_broker_semantics import create_topic, request

DESCRIBE_CONFIGS, METADATA = 32, 3
TOPIC, BROKER = 2, 4
SENSITIVE = {"ssl.key.password", "plain.sasl.jaas.config", "scram-sha-256.sasl.jaas.config",
             "scram-sha-512.sasl.jaas.config"}
MAX_DOC_CHARS = 300  # a sentence or two


# ------------------------------------------------------------------------------------------- the texts

def _check_text(name: str, text: str) -> None:
    assert isinstance(text, str) and text.strip(), f"{name} has no documentation"
    assert text == text.strip() and "\n" not in text, f"{name}: documentation with stray whitespace: {text!r}"
    assert text.endswith("."), f"{name}: documentation is not a finished sentence: {text!r}"
    assert len(text) <= MAX_DOC_CHARS, f"{name}: documentation of {len(text)} characters, more than a sentence or two"


def test_every_broker_property_has_its_own_documentation():
    missing = sorted(name for name, prop in BROKER_PROPERTIES.items() if not prop.doc.strip())
    assert not missing, f"broker properties without documentation (config.py, Property(doc=...)): {missing}"
    for name, prop in BROKER_PROPERTIES.items():
        _check_text(name, prop.doc)
        assert broker_property_doc(name) == prop.doc


def test_every_topic_config_has_its_own_documentation():
    missing = sorted(name for name, spec in TOPIC_CONFIGS.items() if not spec.doc.strip())
    assert not missing, f"topic configs without documentation (config.py, TopicConfig): {missing}"
    for name, spec in TOPIC_CONFIGS.items():
        _check_text(name, spec.doc)
        assert topic_config_doc(name) == spec.doc
    # DescribeConfigs lists a topic's defaults merged with its overrides: every one of them has a text
    listed = set(BrokerConfig().topic_defaults())
    undefined = sorted(listed - set(TOPIC_CONFIGS))
    assert not undefined, f"topic configs listed without a definition: {undefined}"


def test_a_config_without_a_text_still_gets_a_non_empty_one():
    assert broker_property_doc("no.such.property").strip()
    assert topic_config_doc("no.such.config").strip()


# ------------------------------------------------------------------------------------------- raw requests

def _node_id(bootstrap: str) -> int:
    brokers = request(bootstrap, METADATA, 1, {"topics": []})["brokers"]
    assert len(brokers) == 1
    return brokers[0]["node_id"]


def _describe(bootstrap: str, version: int, resources: list[tuple[int, str]], include_documentation: bool,
              keys: list[str] | None = None) -> list[dict]:
    body = {"resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": keys}
                          for kind, name in resources],
            "include_synonyms": True, "include_documentation": include_documentation}
    results = request(bootstrap, DESCRIBE_CONFIGS, version, body)["results"]
    assert [(r["resource_type"], r["resource_name"]) for r in results] == resources
    for r in results:
        assert r["error_code"] == 0, r
    return results


def _assert_documented(configs: list[dict], expected: dict[str, str], asked: bool) -> None:
    """Each config listed once, the set of names expected, and its documentation as asked."""
    names = [c["name"] for c in configs]
    assert len(names) == len(set(names))
    assert set(names) == set(expected)
    for c in configs:
        if asked:
            assert isinstance(c["documentation"], str) and c["documentation"].strip(), c
            assert c["documentation"] == expected[c["name"]], c["name"]
        else:
            assert c["documentation"] is None, c


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [3, 4])
@pytest.mark.parametrize("asked", [True, False], ids=["with-docs", "without-docs"])
def test_raw_describe_configs_documentation(broker, topic_name, version, asked):
    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "3600000", "cleanup.policy": "compact"})
    own = str(_node_id(broker.bootstrap))
    topic, node, cluster = _describe(broker.bootstrap, version, [(TOPIC, topic_name), (BROKER, own), (BROKER, "")],
                                     asked)
    topic_docs = {name: spec.doc for name, spec in TOPIC_CONFIGS.items()}
    broker_docs = {name: prop.doc for name, prop in BROKER_PROPERTIES.items()}
    _assert_documented(topic["configs"], topic_docs, asked)
    _assert_documented(node["configs"], broker_docs, asked)
    assert cluster["configs"] == []  # the cluster-wide resource lists its dynamic defaults only, as Kafka's does
    # the documentation changes nothing else: overrides, synonyms and hidden passwords as without it
    by_name = {c["name"]: c for c in topic["configs"]}
    assert (by_name["retention.ms"]["value"], by_name["retention.ms"]["config_source"]) == ("3600000", 1)
    # Kafka lists no broker synonym of retention.ms unless log.retention.ms is set (it has no default)
    assert [s["name"] for s in by_name["retention.ms"]["synonyms"]] == ["retention.ms"]
    assert [(s["name"], s["value"], s["source"]) for s in by_name["cleanup.policy"]["synonyms"]] == [("cleanup.policy", "compact", 1),
                                                                ("log.cleanup.policy", "delete", 5)]
    for c in node["configs"]:
        if c["name"] in SENSITIVE:
            assert c["is_sensitive"] and c["value"] is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [3, 4])
def test_raw_documentation_follows_configuration_keys(broker, topic_name, version):
    create_topic(broker.bootstrap, topic_name)
    keys = ["retention.ms", "min.insync.replicas"]
    (topic,) = _describe(broker.bootstrap, version, [(TOPIC, topic_name)], True, keys)
    assert {c["name"]: c["documentation"] for c in topic["configs"]} == {k: TOPIC_CONFIGS[k].doc for k in keys}
    own = str(_node_id(broker.bootstrap))
    (cluster,) = _describe(broker.bootstrap, version, [(BROKER, own)], True, ["log.retention.ms", "ssl.key.password"])
    assert {c["name"]: c["documentation"] for c in cluster["configs"]} == {
        "log.retention.ms": BROKER_PROPERTIES["log.retention.ms"].doc,
        "ssl.key.password": BROKER_PROPERTIES["ssl.key.password"].doc}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [0, 1, 2])
def test_raw_versions_before_documentation_are_unchanged(broker, topic_name, version):
    """v0-2 have neither the request flag nor the response field: the flag is not sent, no text comes back
    (the decoder leaves the field at its default)."""
    create_topic(broker.bootstrap, topic_name)
    body = {"resources": [{"resource_type": TOPIC, "resource_name": topic_name, "configuration_keys": None},
                          {"resource_type": BROKER, "resource_name": str(_node_id(broker.bootstrap)),
                           "configuration_keys": None}],
            "include_synonyms": version >= 1, "include_documentation": True}
    results = request(broker.bootstrap, DESCRIBE_CONFIGS, version, body)["results"]
    assert [r["error_code"] for r in results] == [0, 0]
    assert {c["name"] for c in results[0]["configs"]} == set(TOPIC_CONFIGS)
    assert {c["name"] for c in results[1]["configs"]} == set(BROKER_PROPERTIES)
    assert not any(c["documentation"] for r in results for c in r["configs"])


# ------------------------------------------------------------------------------------------- kafka-python

@pytest.mark.timeout(90)
def test_kafka_python_protocol_reads_the_documentation(broker, topic_name):
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.admin.configs import DescribeConfigsRequest

    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "3600000"})
    node_id = _node_id(broker.bootstrap)
    client = KafkaNetClient(bootstrap_servers=broker.bootstrap, client_id="describe-configs-docs")
    try:
        client.check_version()
        for version in (3, 4):
            for asked in (True, False):
                req = DescribeConfigsRequest(
                    resources=[(TOPIC, topic_name, None), (BROKER, str(node_id), None)],
                    include_synonyms=False, include_documentation=asked, min_version=version, max_version=version)
                response = client.send_and_receive(node_id, req, timeout_ms=30000)
                assert response.API_VERSION == version
                topic, node = response.results
                assert (topic.error_code, topic.resource_name, node.error_code) == (0, topic_name, 0)
                for result, texts in ((topic, {n: s.doc for n, s in TOPIC_CONFIGS.items()}),
                                      (node, {n: p.doc for n, p in BROKER_PROPERTIES.items()})):
                    seen = {c.name: c.documentation for c in result.configs}
                    assert set(seen) == set(texts), (version, asked)
                    if asked:
                        assert seen == texts, (version, asked)
                    else:
                        assert set(seen.values()) == {None}, (version, asked)
    finally:
        client.close()
