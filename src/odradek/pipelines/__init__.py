"""Data pipelines shipped with odradek (PySpark; need the `spark` extra and a JDK).

`odradek pipeline NAME [ARGS...]` runs one; `odradek pipeline NAME --help` lists its options.
"""

from __future__ import annotations

import importlib.util
import sys

PIPELINES = ("clickstream",)


def run_pipeline(name: str, argv: list[str]) -> int:
    if name not in PIPELINES:
        print(f"odradek: unknown pipeline {name!r} (known: {', '.join(PIPELINES)})", file=sys.stderr)
        return 2
    # The pipelines import PySpark only where they use it, so check for the extra before anything runs
    # (events would be produced before a missing import failed).
    missing = [m for m in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"odradek: the {name} pipeline needs the 'spark' extra (pip install 'odradek[spark]'); "
              f"missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    from odradek.pipelines.clickstream import main

    return main(argv)
