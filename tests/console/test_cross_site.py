"""A web page on another origin attacks the console and the registry from a real browser (headless Chromium).

The page is served by a small http.server on another loopback port, under the name evil.test; Chromium's
--host-resolver-rules maps evil.test and rebound.test to 127.0.0.1 as an attacker's DNS would. The page
sends what a browser lets any site send without asking: fetch() POSTs with text/plain bodies (mode no-cors)
and form POSTs (enctype text/plain, which can carry a JSON-looking body), plus a JSON fetch that needs a
CORS pre-flight. Then the cluster and the registry are looked at: no topic created, no record produced, no
offsets reset, no schema registered. DNS rebinding is the page loaded from rebound.test at the console's
own port (same origin for the browser): its reads and its DELETE get 400. Last, the console's own page
works in the browser with HTTP basic authentication on.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from typing import Iterator

import pytest

from odradek.http_guard import hash_password
from tests.conftest import free_port
from tests.console.conftest import CHROMIUM, _unavailable
from tests.interop.helpers import consumer_config, wait_until
from tests.interop.test_schema_registry import RegistryProcess
from tests.security.test_http_hostile import call, committed, end_offset, topic_names

TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """Chromium as conftest.py starts it, with evil.test and rebound.test resolving to loopback."""
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} not found (tools/install-system-deps.sh installs Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (the project's [test] extra)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                               args=["--no-sandbox", "--host-resolver-rules=MAP evil.test 127.0.0.1, "
                                                     "MAP rebound.test 127.0.0.1"])
        yield b
        b.close()


class EvilSite:
    """An http.server on its own loopback port serving one page (`html`)."""

    def __init__(self) -> None:
        site = self
        self.html = ""

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = site.html.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://evil.test:{self.port}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def evil_site() -> Iterator[EvilSite]:
    site = EvilSite()
    yield site
    site.close()


def text_form(form_id: str, action: str, body: dict) -> str:
    """A form whose text/plain submission is the JSON `body` (name=value, with the '=' hidden in a string)."""
    text = json.dumps(body)
    name, value = text[:-2] + ',"pad":"', '"}'
    return (f'<form id="{form_id}" method="POST" enctype="text/plain" target="{form_id}-frame" action="{action}">'
            f"<input name='{name}' value='{value}'></form><iframe name=\"{form_id}-frame\"></iframe>")


ATTACK_JS = """
async (targets) => {
  const sent = [];
  for (const [url, body] of targets) {
    // no pre-flight: mode no-cors with a text/plain body
    try { await fetch(url, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
                             body: JSON.stringify(body)}); sent.push("no-cors"); } catch (e) { sent.push(String(e)); }
    // a JSON body needs a pre-flight, which the services never grant
    try { await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                             body: JSON.stringify(body)}); sent.push("cors-ok"); }
    catch (e) { sent.push("cors-refused"); }
  }
  return sent;
}
"""


def test_a_page_on_another_origin_changes_nothing(broker, console_factory, tmp_path, evil_site, page,
                                                  topic_name) -> None:
    bootstrap = broker.bootstrap
    console = console_factory(bootstrap)
    registry = RegistryProcess(bootstrap, tmp_path / "registry.log", ("--topic", "_schemas_cross_site")).start()
    try:
        json_type = {"Content-Type": "application/json"}
        assert call(console.port, "POST", "/api/topics", json.dumps({"name": topic_name}), json_type)[0] == 201
        wait_until(lambda: topic_name in topic_names(bootstrap), timeout=30, message="the topic to exist")
        assert call(console.port, "POST", f"/api/topics/{topic_name}/messages", json.dumps({"value": "v"}),
                    json_type)[0] == 200
        from confluent_kafka import Consumer, TopicPartition

        group = f"{topic_name}-g"
        c = Consumer(consumer_config(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
        c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        c.close()

        victim = f"{topic_name}-victim"
        schema = {"schema": json.dumps({"type": "string"})}
        targets = [(f"{console.url}/api/topics", {"name": victim, "partitions": 1}),
                   (f"{console.url}/api/topics/{topic_name}/messages", {"value": "evil"}),
                   (f"{console.url}/api/groups/{group}/reset", {"to": "earliest"}),
                   (f"{registry.url}/subjects/evil-value/versions", schema)]
        evil_site.html = "<!doctype html><title>cat pictures</title>" + "".join(
            text_form(f"f{i}", url, body) for i, (url, body) in enumerate(targets))
        page.goto(evil_site.url)
        assert page.evaluate(ATTACK_JS, [list(t) for t in targets]) == ["no-cors", "cors-refused"] * len(targets)
        for i, (url, _) in enumerate(targets):
            with page.expect_response(url) as answered:
                page.evaluate(f"document.getElementById('f{i}').submit()")
            assert answered.value.status in (403, 415), (url, answered.value.status)

        assert victim not in topic_names(bootstrap) and topic_name in topic_names(bootstrap)
        assert end_offset(bootstrap, topic_name) == 1
        assert committed(bootstrap, group, topic_name) == 1
        assert call(registry.port, "GET", "/subjects")[2] == []

        # DNS rebinding: the attacker's name now points at the console; the page is same-origin with it
        for service in (console, registry):
            answer = page.goto(f"http://rebound.test:{service.port}/")
            assert answer is not None and answer.status == 400
        page.goto(f"http://rebound.test:{console.port}/")
        statuses = page.evaluate("""async (topic) => [
            (await fetch("/api/topics")).status,
            (await fetch("/api/topics/" + topic, {method: "DELETE"})).status]""", topic_name)
        assert statuses == [400, 400]
        assert topic_name in topic_names(bootstrap)
    finally:
        registry.stop()


def test_console_page_works_with_basic_authentication(broker, tmp_path, browser) -> None:
    from playwright.sync_api import expect

    from tests.console.conftest import ConsoleProcess

    users = tmp_path / "users"
    users.write_text(f"admin:{hash_password('s3cret pass', iterations=1000)}\n")
    users.chmod(0o600)
    console = ConsoleProcess(broker.bootstrap, tmp_path / "console.log", ("--users-file", str(users)))
    try:
        anonymous = browser.new_context()
        assert anonymous.request.get(console.url + "/").status == 401
        anonymous.close()
        context = browser.new_context(http_credentials={"username": "admin", "password": "s3cret pass"})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(console.url + "/")
        expect(page.get_by_test_id("brokers-count")).to_have_text("1", timeout=TIMEOUT_MS)
        page.get_by_role("link", name="Topics").click()
        form = page.get_by_test_id("create-topic")
        form.locator("input[name=name]").fill("made-behind-basic-auth")
        form.get_by_role("button", name="Create topic").click()
        expect(page.get_by_test_id("topic-row").filter(has_text="made-behind-basic-auth")).to_be_visible(
            timeout=TIMEOUT_MS)
        context.close()
        assert not errors, errors
    finally:
        console.stop()
