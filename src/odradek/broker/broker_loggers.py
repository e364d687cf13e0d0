"""BROKER_LOGGER configs (config resource type 8): the broker's Python log levels, described and changed at
run time the way Kafka's log4j loggers are (DescribeConfigs, IncrementalAlterConfigs; KIP-412).

The loggers are the root logger (named `root`, as in log4j) and every `odradek` logger that exists in this
process (`odradek`, `odradek.broker.core`, ...), named by their logger names. A logger's value is its
effective level in log4j's words: Python's DEBUG, INFO, WARNING, ERROR and CRITICAL are DEBUG, INFO, WARN,
ERROR and FATAL; TRACE is a level of its own below DEBUG (5, named TRACE in log lines); above CRITICAL is
OFF and the root at NOTSET is ALL.

A change is checked as Kafka's RuntimeLoggerManager checks it, each failure with Kafka's code and message:
the resource name must be this broker's id; SET names an existing logger (INVALID_CONFIG) and one of
Kafka's six levels, spelt in capitals (INVALID_CONFIG); DELETE names an existing logger other than the root
(INVALID_REQUEST) and makes it follow its parent again (Python's NOTSET: with nothing set in between, the
root's level); APPEND, SUBTRACT and unknown operations are INVALID_REQUEST. Nothing is applied unless every
change of the resource passes; `validate_only` applies nothing. Changes live as long as the process:
a restart starts from `--log-level` again, as Kafka starts from its log4j file.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
import re

from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

RESOURCE_BROKER_LOGGER = 8
SOURCE_DYNAMIC_BROKER_LOGGER = 6  # DescribeConfigs' DYNAMIC_BROKER_LOGGER_CONFIG
ROOT = "root"
PACKAGE = "odradek"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATION_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
# the levels Kafka lets a logger be set to, and Python's for each
SETTABLE_LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
                   "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
VALID_LEVELS_TEXT = ", ".join(sorted(SETTABLE_LEVELS))
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")

logging.getLogger(PACKAGE)  # the package's own logger always exists, so that one change reaches every module


def level_name(level: int) -> str:
    """A Python level in log4j's words."""
    if level <= logging.NOTSET:
        return "ALL"
    for name, value in sorted(SETTABLE_LEVELS.items(), key=lambda item: item[1]):
        if level <= value:
            return name
    return "OFF"


def logger_names() -> list[str]:
    """The loggers this resource shows: the root and every existing odradek logger, sorted."""
    names = [name for name, logger in logging.Logger.manager.loggerDict.items()
             if isinstance(logger, logging.Logger) and (name == PACKAGE or name.startswith(PACKAGE + "."))]
    return [ROOT, *sorted(names)]


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    existing = logging.Logger.manager.loggerDict.get(name)
    if isinstance(existing, logging.Logger) and (name == PACKAGE or name.startswith(PACKAGE + ".")):
        return existing
    return None


def describe(node_id: int, resource_name: str, keys: list[str] | None) -> tuple[int, str, list[dict]]:
    """DescribeConfigs of a BROKER_LOGGER resource: (error code, message, config entries)."""
    if not resource_name:
        return ErrorCode.INVALID_REQUEST, "Broker id must not be empty", []
    if not _INTEGER.match(resource_name):
        return ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {resource_name}", []
    if int(resource_name) != node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id} but received {resource_name}", []
    entries = []
    for name in logger_names():
        if keys and name not in keys:
            continue
        logger = _logger(name)
        if logger is None:
            continue
        entries.append({"name": name, "value": level_name(logger.getEffectiveLevel()), "read_only": False,
                        "config_source": SOURCE_DYNAMIC_BROKER_LOGGER, "is_default": False, "is_sensitive": False,
                        "synonyms": [], "config_type": 0, "documentation": ""})
    return ErrorCode.NONE, "", entries


def check_shape(changes: list[dict]) -> tuple[int, str] | None:
    """What Kafka refuses before it authorizes a resource: a config named twice, a null value to set."""
    names = [c["name"] for c in changes]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    nulls = [c["name"] for c in changes if c["config_operation"] != DELETE and c["value"] is None]
    if nulls:
        return ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
    return None


def alter(node_id: int, resource_name: str, changes: list[dict], validate_only: bool) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of a BROKER_LOGGER resource, already authorized: (error code, message)."""
    if not _INTEGER.match(resource_name):
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}"
    if int(resource_name) != node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected node id. Expected {node_id}, but received {resource_name}"
    planned: list[tuple[logging.Logger, int]] = []
    for change in changes:
        name, op, value = change["name"], change["config_operation"], change["value"]
        if op in (SET, DELETE):
            logger = _logger(name)
            if logger is None:
                return ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!"
            if op == SET:
                if value not in SETTABLE_LEVELS:
                    return ErrorCode.INVALID_CONFIG, (f"Cannot set the log level of {name} to {value} as it is not a "
                                                      f"supported log level. Valid log levels are {VALID_LEVELS_TEXT}")
                planned.append((logger, SETTABLE_LEVELS[value]))
            else:
                if name == ROOT:
                    return ErrorCode.INVALID_REQUEST, f"Removing the log level of the {ROOT} logger is not allowed"
                planned.append((logger, logging.NOTSET))
        elif op in OPERATION_NAMES:
            return ErrorCode.INVALID_REQUEST, (f"{OPERATION_NAMES[op]} operation is not allowed for the BROKER_LOGGER "
                                               "resource")
        else:
            return ErrorCode.INVALID_REQUEST, f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource"
    if not validate_only:
        for logger, level in planned:
            logger.setLevel(level)
            if level == logging.NOTSET:
                log.warning("Unset the log level of %s", logger.name)
            else:
                log.warning("Updated the log level of %s to %s", logger.name, level_name(level))
    return ErrorCode.NONE, None
