"""Support for the wheel tests: the `packaging` marker and a timing summary at the end of the run.

This directory has no `__init__.py` on purpose. With pytest's default import mode, an `__init__.py` here
would make `tests/packaging` a regular package named `packaging`, found on sys.path (pytest puts `tests/`
there) before the real `packaging` distribution that pip, build and pytest itself import. Any later
`import packaging.version` in the session then fails. Without it, this directory is at most a namespace
portion, and the installed `packaging` wins.
"""

from __future__ import annotations

import pytest

TIMINGS_KEY = pytest.StashKey[dict]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "packaging: builds the wheel and installs it into fresh venvs (deselect with -m 'not packaging')")


@pytest.fixture(scope="session")
def timings(request: pytest.FixtureRequest) -> dict[str, float]:
    """Wall-clock seconds of the slow steps (build, venv + install), printed in the terminal summary."""
    return request.config.stash.setdefault(TIMINGS_KEY, {})


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    measured = config.stash.get(TIMINGS_KEY, {})
    if measured:
        terminalreporter.section("wheel packaging timings")
        for name, seconds in measured.items():
            terminalreporter.write_line(f"{name}: {seconds:.1f} s")
