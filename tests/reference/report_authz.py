"""Run the authorization parity suite and print its table: "N cases, M equal", then each case that differs.

    .venv/bin/python -m tests.reference.report_authz [--markdown] [--from FILE.jsonl] [-k EXPR]

It runs tests/reference/test_authz_differential.py with pytest (one secured Kafka, one secured odradek),
collects each case's outcome from the JSON lines the test writes (ODRADEK_DIFFERENTIAL_REPORT, as
report.py does) and prints, per differing case, `API vN [variant] user: path: kafka X vs odradek Y`, with
PERMISSIVE where odradek allows or shows more than Kafka; then the deliberate differences with their
reasons (known.py KNOWN_AUTHZ). `--markdown` prints it as tables for docs/reference.md; `--from` reads a
report written before instead of running. Exit code 0 whether or not cases differ; 1 when nothing ran.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import report
from .report import cell, read


def run(keyword: str | None) -> list[dict]:
    return report.run(keyword, "test_authz_differential.py")


def counts(cases: list[dict]) -> tuple[int, int, int, int]:
    """cases, equal (exactly), equal but for deliberate differences, different."""
    different = sum(1 for c in cases if c["differences"])
    known = sum(1 for c in cases if not c["differences"] and c["known"])
    return len(cases), len(cases) - different - known, known, different


def plain(records: list[dict]) -> str:
    cases = [r for r in records if "authz" in r]
    total, equal, known, different = counts(cases)
    lines = [f"{total} cases (API, version, variant, user), {equal} equal, {known} equal but for deliberate "
             f"differences, {different} different"]
    for c in cases:
        for path, k, o, permissive in c["differences"]:
            lines.append(f"{c['authz']}: {path}: kafka {k} vs odradek {o}{'  PERMISSIVE' if permissive else ''}")
    deliberate = [(c, d) for c in cases for d in c["known"]]
    if deliberate:
        lines.append("\ndeliberate (tests/reference/known.py KNOWN_AUTHZ):")
        lines += [f"  {c['authz']}: {path}: kafka {k} vs odradek {o} ({reason})"
                  for c, (path, k, o, reason) in deliberate]
    return "\n".join(lines)


def markdown(records: list[dict]) -> str:
    cases = [r for r in records if "authz" in r]
    total, equal, known, different = counts(cases)
    lines = [f"**{total} cases, {equal + known} equal** ({equal} exactly, {known} but for deliberate differences), "
             f"**{different} different**.", "", "| API | version | user | variant | field | Kafka | odradek | |",
             "|---|---|---|---|---|---|---|---|"]
    for c in cases:
        for path, k, o, permissive in c["differences"]:
            kind = "odradek more lenient" if permissive else "differs"
            lines.append(f"| {c['api_name']} | {c['version']} | {c['principal']} | {cell(c['variant'])} | "
                         f"`{cell(path)}` | {cell(k)} | {cell(o)} | {kind} |")
    reasons: dict[str, dict[str, set[str]]] = {}  # reason -> API -> "vN user" of the cases it covers
    for c in cases:
        for *_, reason in c["known"]:
            reasons.setdefault(reason, {}).setdefault(c["api_name"], set()).add(c["authz"])
    if reasons:
        lines += ["", "| deliberate | cases |", "|---|---|"]
        for reason, apis in reasons.items():
            where = "; ".join(f"{api} ({len(ids)})" for api, ids in apis.items())
            lines.append(f"| {cell(reason)} | {cell(where)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--from", dest="source", type=Path, help="read this report instead of running the suite")
    parser.add_argument("-k", dest="keyword", help="only the tests matching this pytest -k expression")
    args = parser.parse_args()
    records = read(args.source) if args.source else run(args.keyword)
    if not any("authz" in r for r in records):
        print("no case ran (see pytest's output above)", file=sys.stderr)
        return 1
    print()
    print(markdown(records) if args.markdown else plain(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
