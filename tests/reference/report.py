"""Run every differential scenario and summarise: "N scenarios, M identical", then each difference.

    .venv/bin/python tests/reference/report.py [--markdown] [--all] [-k EXPR]

It runs tests/reference/test_differential.py with pytest (one Kafka, one odradek), collects each scenario's
outcome from the JSON lines the tests write (ODRADEK_DIFFERENTIAL_REPORT) and prints, per scenario that
differs, `path: kafka value vs odradek value`, then the error messages whose texts differ. `--markdown`
prints the same as a Markdown section for docs/reference.md. The exit code is 0 whether or not scenarios
differ; 1 when nothing ran (no Kafka install, a harness error).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def run(keyword: str | None, test_file: str = "test_differential.py") -> list[dict]:
    """Run ``test_file`` (a suite of this directory) with pytest and return the JSON lines its tests wrote."""
    import pytest

    fd, path = tempfile.mkstemp(prefix="odradek-differential-", suffix=".jsonl")
    os.close(fd)
    os.environ["ODRADEK_DIFFERENTIAL_REPORT"] = path
    args = ["-q", "--tb=no", "-rs", "-p", "no:cacheprovider", "--rootdir", str(REPO), str(HERE / test_file)]
    if keyword:
        args += ["-k", keyword]
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))  # `tests.conftest`, as under `python -m pytest` from the repository
    pytest.main(args)
    try:
        return read(Path(path))
    finally:
        os.unlink(path)


def read(path: Path) -> list[dict]:
    """The records of a report written before (JSON lines)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plain(records: list[dict], show_all: bool = False) -> str:
    meta = next((r for r in records if "kafka_version" in r), {})
    outcomes = [r for r in records if "scenario" in r]
    same = [o for o in outcomes if not o["differences"]]
    exact = [o for o in same if not o.get("known")]
    lines = []
    if meta:
        lines.append(f"Apache Kafka {meta['kafka_version']} started in {meta['kafka_start_seconds']} s "
                     f"(storage format {meta['kafka_format_seconds']} s of it)")
    lines.append(f"{len(outcomes)} scenarios, {len(same)} identical ({len(exact)} exactly, {len(same) - len(exact)} "
                 "but for deliberate differences; T: the scenario's own topic name)")
    for o in outcomes:
        if o["differences"]:
            lines.append(f"\n{o['scenario']} ({o['api']} v{o['version']}):")
            lines += [f"  {path}: kafka {k} vs odradek {v}" for path, k, v in o["differences"]]
        elif show_all:
            lines.append(f"\n{o['scenario']} ({o['api']} v{o['version']}): identical: {o['kafka']}")
    known = [(o, k) for o in outcomes for k in o.get("known", [])]
    if known:
        lines.append("\ndeliberate differences (tests/reference/known.py):")
        lines += [f"  {o['scenario']}: {path}: kafka {k} vs odradek {v}" for o, (path, k, v, _) in known]
    texts = [(o, t) for o in outcomes for t in o["texts"]]
    if texts:
        lines.append("\nerror messages that differ (codes equal or compared above):")
        lines += [f"  {o['scenario']}: {path}: kafka {k!r} vs odradek {v!r}" for o, (path, k, v) in texts]
    return "\n".join(lines)


def markdown(records: list[dict]) -> str:
    outcomes = [r for r in records if "scenario" in r]
    same = sum(1 for o in outcomes if not o["differences"])
    exact = sum(1 for o in outcomes if not o["differences"] and not o.get("known"))
    lines = [f"**{len(outcomes)} scenarios, {same} identical** ({exact} exactly, {same - exact} but for deliberate "
             "differences).", "", "| scenario | field | Kafka | odradek | |", "|---|---|---|---|---|"]
    for o in outcomes:
        for path, k, v in o["differences"]:
            lines.append(f"| {o['scenario']} ({o['api']} v{o['version']}) | `{cell(path)}` | {cell(k)} | {cell(v)} | differs |")
        for path, k, v, reason in o.get("known", []):
            lines.append(f"| {o['scenario']} ({o['api']} v{o['version']}) | `{cell(path)}` | {cell(k)} | {cell(v)} | "
                         f"deliberate: {cell(reason)} |")
    return "\n".join(lines)


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table of the differences")
    parser.add_argument("--all", action="store_true", help="also print each identical response (normalised)")
    parser.add_argument("-k", dest="keyword", help="only the scenarios matching this pytest -k expression")
    args = parser.parse_args()
    records = run(args.keyword)
    if not any("scenario" in r for r in records):
        print("no scenario ran (see pytest's output above)", file=sys.stderr)
        return 1
    print()
    print(markdown(records) if args.markdown else plain(records, args.all))
    return 0


if __name__ == "__main__":
    sys.exit(main())
