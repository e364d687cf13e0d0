"""The registry's compatibility levels, on top of each format's reader/writer question
(`Format.read_problems`, formats.py).

BACKWARD: the new schema can read data written with the previous one (consumers upgrade first);
FORWARD: the previous schema can read data written with the new one (producers upgrade first);
FULL: both. The _TRANSITIVE variants compare with every live version of the subject instead of only the
latest. NONE checks nothing. A schema of another type than the one it is compared with is incompatible.
"""

from __future__ import annotations

from typing import Sequence

from odradek.registry.formats import format_of
from odradek.registry.schema import ParsedSchema

LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")
DEFAULT_LEVEL = "BACKWARD"


def problems(level: str, new: ParsedSchema, existing: Sequence[ParsedSchema]) -> list[str]:
    """Why `new` may not follow `existing` (oldest first) under `level`; empty when it may."""
    if level == "NONE" or not existing:
        return []
    against = existing if level.endswith("_TRANSITIVE") else existing[-1:]
    base = level.removesuffix("_TRANSITIVE")
    read_problems = format_of(new.schema_type).read_problems
    found: list[str] = []
    for old in against:
        if old.schema_type != new.schema_type:
            found.append(f"schema type changed from {old.schema_type} to {new.schema_type}")
            continue
        if base in ("BACKWARD", "FULL"):
            found += [f"new schema cannot read old data: {p}" for p in read_problems(new, old)]
        if base in ("FORWARD", "FULL"):
            found += [f"old schema cannot read new data: {p}" for p in read_problems(old, new)]
    return found
