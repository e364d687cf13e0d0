"""Fixtures of the console tests: an `odradek console` process against a real broker, and headless Chromium.

The browser is Debian's `chromium` (/usr/bin/chromium, tools/install-system-deps.sh) driven by Playwright's
Python package; Playwright's own browser downloads are never used. Without either the browser tests skip,
except under CI (`CI` set) where they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from odradek.tools.zookeeper import end_process
from tests.conftest import free_port

CHROMIUM = "/usr/bin/chromium"
READY_MARKER = "odradek console: serving on "
START_TIMEOUT_S = 30.0
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "console"


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"the console's browser tests must run in CI: {reason}")
    pytest.skip(reason)


class ConsoleProcess:
    def __init__(self, bootstrap: str, log_path: Path, extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        cmd = [sys.executable, "-m", "odradek", "console", "--bootstrap", bootstrap,
               "--listen", f"127.0.0.1:{self.port}", "--sample-interval", "1", *extra_args]
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if READY_MARKER in log_path.read_text():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"odradek console did not start: {log_path.read_text()[-3000:]}")

    def get(self, path: str):
        import json

        with urllib.request.urlopen(self.url + path, timeout=30) as res:
            return json.loads(res.read())

    def stop(self) -> None:
        end_process(self.proc, grace=15)
        self.log.close()


@pytest.fixture
def console_factory(tmp_path: Path) -> Iterator:
    started: list[ConsoleProcess] = []

    def make(bootstrap: str) -> ConsoleProcess:
        c = ConsoleProcess(bootstrap, tmp_path / f"console-{len(started)}.log")
        started.append(c)
        return c

    yield make
    for c in started:
        c.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """Playwright's sync API runs an asyncio loop of its own in this thread while it is started: it must stop
    with the module, or every later test that runs an event loop (aiokafka's, say) finds one running."""
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} not found (tools/install-system-deps.sh installs Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (the project's [test] extra)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser) -> Iterator:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    p = context.new_page()
    p.set_default_timeout(20_000)
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    yield p
    context.close()
    assert not errors, f"JavaScript errors in the console: {errors}"


def screenshot(page, name: str, docs_name: str | None = None) -> Path:
    """Save the page under build/console/NAME.png; with ODRADEK_DOCS_SCREENSHOTS=1 also as docs/DOCS_NAME."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if docs_name and os.environ.get("ODRADEK_DOCS_SCREENSHOTS") == "1":
        page.screenshot(path=str(SCREENSHOTS.parents[1] / "docs" / docs_name), full_page=False)
    return path
