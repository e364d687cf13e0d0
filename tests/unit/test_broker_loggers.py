"""broker/broker_loggers.py: Python levels in log4j's words, and changes checked as Kafka checks them (the
answers are compared with Kafka 4.4 itself in tests/security/test_kafka_parity.py)."""

from __future__ import annotations

import logging

import pytest

from odradek.broker import broker_loggers as bl
from odradek.protocol.errors import ErrorCode

NAME = "odradek.test_broker_loggers.child"


@pytest.fixture
def logger():
    made = logging.getLogger(NAME)
    parent = logging.getLogger("odradek.test_broker_loggers")
    yield made
    made.setLevel(logging.NOTSET)
    parent.setLevel(logging.NOTSET)


@pytest.mark.parametrize("level, name", [(0, "ALL"), (1, "TRACE"), (5, "TRACE"), (10, "DEBUG"), (15, "INFO"),
                                         (20, "INFO"), (30, "WARN"), (40, "ERROR"), (50, "FATAL"), (51, "OFF")])
def test_level_names(level, name):
    assert bl.level_name(level) == name


def test_only_the_root_and_odradek_loggers_are_shown(logger):
    logging.getLogger("somebody.else")
    names = bl.logger_names()
    assert names[0] == "root" and NAME in names and "odradek" in names
    assert "somebody.else" not in names and all(n == "root" or n.startswith("odradek") for n in names)
    error, message, entries = bl.describe(3, "3", [NAME, "somebody.else"])
    assert (error, message, [e["name"] for e in entries]) == (0, "", [NAME])


def test_set_and_delete(logger):
    assert bl.alter(3, "3", [{"name": NAME, "config_operation": bl.SET, "value": "TRACE"}], False) == (0, None)
    assert logger.level == bl.TRACE and bl.level_name(logger.getEffectiveLevel()) == "TRACE"
    logging.getLogger("odradek.test_broker_loggers").setLevel(logging.ERROR)
    assert bl.alter(3, "3", [{"name": NAME, "config_operation": bl.DELETE, "value": None}], False) == (0, None)
    assert logger.level == logging.NOTSET and logger.getEffectiveLevel() == logging.ERROR  # follows its parent


def test_nothing_applies_unless_every_change_passes(logger):
    changes = [{"name": NAME, "config_operation": bl.SET, "value": "DEBUG"},
               {"name": "root", "config_operation": bl.DELETE, "value": None}]
    assert bl.alter(3, "3", changes, False)[0] == ErrorCode.INVALID_REQUEST
    assert logger.level == logging.NOTSET
    assert bl.alter(3, "3", changes[:1], True) == (0, None) and logger.level == logging.NOTSET  # validate only


@pytest.mark.parametrize("name, changes, expected", [
    ("x", [], (ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: x")),
    ("4", [], (ErrorCode.INVALID_REQUEST, "Unexpected node id. Expected 3, but received 4")),
    ("3", [("odradek.nope", bl.SET, "DEBUG")], (ErrorCode.INVALID_CONFIG, "Logger odradek.nope does not exist!")),
    ("3", [("asyncio", bl.SET, "DEBUG")], (ErrorCode.INVALID_CONFIG, "Logger asyncio does not exist!")),
    ("3", [(NAME, bl.SET, "debug")], (ErrorCode.INVALID_CONFIG, f"Cannot set the log level of {NAME} to debug as it "
                                      "is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, "
                                      "TRACE, WARN")),
    ("3", [(NAME, bl.APPEND, "DEBUG")], (ErrorCode.INVALID_REQUEST,
                                         "APPEND operation is not allowed for the BROKER_LOGGER resource")),
    ("3", [(NAME, 7, "DEBUG")], (ErrorCode.INVALID_REQUEST,
                                 "Unknown operation type 7 is not allowed for the BROKER_LOGGER resource")),
])
def test_refusals(logger, name, changes, expected):
    configs = [{"name": n, "config_operation": op, "value": v} for n, op, v in changes]
    assert bl.alter(3, name, configs, False) == expected


def test_shape_checks():
    dup = [{"name": "root", "config_operation": bl.SET, "value": "INFO"}] * 2
    assert bl.check_shape(dup) == (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    null = [{"name": "root", "config_operation": bl.SET, "value": None}]
    assert bl.check_shape(null) == (ErrorCode.INVALID_REQUEST, "Null value not supported for : root")
    assert bl.check_shape([{"name": "root", "config_operation": bl.DELETE, "value": None}]) is None
