"""Data pipelines shipped with odradek (PySpark; need the `spark` extra and a JDK).

`odradek pipeline NAME [ARGS...]` runs one; `odradek pipeline NAME --help` lists its options.
"""

from __future__ import annotations

PIPELINES = ("clickstream",)


def run_pipeline(name: str, argv: list[str]) -> int:
    try:
        if name == "clickstream":
            from odradek.pipelines.clickstream import main
        else:
            raise SystemExit(f"odradek: unknown pipeline {name!r} (known: {', '.join(PIPELINES)})")
    except ImportError as exc:
        print(f"odradek: the {name} pipeline needs the 'spark' extra (pip install 'odradek[spark]'): {exc}")
        return 2
    return main(argv)
