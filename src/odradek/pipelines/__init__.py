"""Data pipelines shipped with odradek (PySpark; need the `spark` extra and a JDK).

`odradek pipeline NAME [ARGS...]` runs one; `odradek pipeline NAME --help` lists its options.
"""

from __future__ import annotations

import sys

PIPELINES = ("clickstream",)


def run_pipeline(name: str, argv: list[str]) -> int:
    if name not in PIPELINES:
        print(f"odradek: unknown pipeline {name!r} (known: {', '.join(PIPELINES)})", file=sys.stderr)
        return 2
    from odradek.spark import extra_missing

    # events would be produced before a missing import failed
    if extra_missing(f"the {name} pipeline", "spark"):
        return 2
    from odradek.pipelines.clickstream import main

    return main(argv)
