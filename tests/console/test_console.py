"""`odradek console` end to end: a real broker, the console as a subprocess, and (for the UI) headless Chromium.

The browser tests create a topic through the UI, produce through the form, find the message in the browser
(text and JSON views), watch a slowly committing group's lag fall on the group page, and reset a stopped
group's offsets; each page's screenshot goes to build/console/ (ODRADEK_DOCS_SCREENSHOTS=1 also refreshes
docs/console-overview.png and docs/console-topic.png). The first test covers the JSON API over plain HTTP.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.console.conftest import screenshot

TIMEOUT_MS = 20_000


def _request(url: str, method: str = "GET", body: dict | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def _produce(bootstrap: str, topic: str, values: list[bytes], key: bytes | None = None) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, key=key, value=v)
    assert p.flush(15) == 0


class SlowConsumer:
    """A confluent-kafka group member that commits after every record and sleeps between records."""

    def __init__(self, bootstrap: str, group: str, topic: str, delay_s: float) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
        self.consumer.subscribe([topic])
        self.delay_s = delay_s
        self.stopping = threading.Event()
        self.consumed = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            self.consumer.commit(message=msg, asynchronous=False)
            self.consumed += 1
            self.stopping.wait(self.delay_s)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(15)
        self.consumer.close()  # leaves the group: it has no members afterwards


def test_json_api(broker_factory, console_factory):
    broker = broker_factory()
    console = console_factory(broker.bootstrap)
    url = console.url + "/api"
    status, health = _request(url + "/health")
    assert status == 200 and health["bootstrap"] == broker.bootstrap

    status, body = _request(url + "/topics", "POST", {"name": "api-topic", "partitions": 2,
                                                       "configs": {"retention.ms": "3600000"}})
    assert status == 201, body
    status, body = _request(url + "/topics", "POST", {"name": "api-topic", "partitions": 2})
    assert status == 502 and "already exists" in body["error"].lower().replace("_", " "), body

    status, overview = _request(url + "/overview")
    assert overview["topics"] == 1 and overview["partitions"] == 2 and len(overview["brokers"]) == 1
    assert overview["under_replicated"] == 0 and overview["controller"] == overview["brokers"][0]["id"]

    status, delivered = _request(url + "/topics/api-topic/messages", "POST",
                                 {"key": "k1", "value": '{"n": 1}', "headers": [["source", "test"]], "partition": 1})
    assert status == 200 and delivered == {"topic": "api-topic", "partition": 1, "offset": 0}
    _produce(broker.bootstrap, "api-topic", [f"v{i}".encode() for i in range(5)], key=b"other")

    status, topic = _request(url + "/topics/api-topic")
    assert [p["partition"] for p in topic["partitions"]] == [0, 1] and topic["messages"] == 6
    assert all(p["leader"] == 0 and p["isr"] == [0] and p["low"] == 0 for p in topic["partitions"])
    # sizes from DescribeLogDirs: every partition here holds records, so some bytes
    assert all(p["size"] > 0 for p in topic["partitions"]), topic["partitions"]

    status, configs = _request(url + "/topics/api-topic/configs")
    assert {"name": "retention.ms", "value": "3600000"}.items() <= \
        next(c for c in configs if c["name"] == "retention.ms").items()

    status, page = _request(url + "/topics/api-topic/messages?start=beginning&key=k1")
    assert status == 200 and len(page["records"]) == 1, page
    rec = page["records"][0]
    import base64

    assert base64.b64decode(rec["value"]) == b'{"n": 1}' and base64.b64decode(rec["key"]) == b"k1"
    assert rec["headers"] == [{"key": "source", "value": base64.b64encode(b"test").decode()}]
    status, page = _request(url + "/topics/api-topic/messages?start=end&limit=2")
    assert len(page["records"]) <= 4 and page["complete"]  # the last 2 of each partition
    status, page = _request(url + "/topics/api-topic/messages?start=offset&offset=3&partition=0")
    assert [r["offset"] for r in page["records"]] == [3, 4]
    status, page = _request(url + f"/topics/api-topic/messages?start=timestamp&timestamp={int(time.time() * 1000) + 60_000}")
    assert page["records"] == []
    positions = ",".join(f"{p}:{o}" for p, o in page["next"].items())
    _produce(broker.bootstrap, "api-topic", [b"tail-me"])
    status, page = _request(url + f"/topics/api-topic/messages?positions={positions}")
    assert [base64.b64decode(r["value"]) for r in page["records"]] == [b"tail-me"]

    consumer = SlowConsumer(broker.bootstrap, "api-group", "api-topic", 0.0)
    try:
        _wait(lambda: consumer.consumed >= 7, 30, "the consumer to read every record")
        status, body = _request(url + "/groups/api-group/reset", "POST", {"to": "earliest"})
        assert status == 409 and "active member" in body["error"], body
        status, group = _request(url + "/groups/api-group")
        assert len(group["members"]) == 1 and group["lag"] == 0
    finally:
        consumer.stop()
    status, body = _request(url + "/groups/api-group/reset", "POST", {"topic": "api-topic", "to": "offset", "offset": 1})
    assert status == 200 and sorted((p["partition"], p["after"]) for p in body["reset"]) == [(0, 1), (1, 1)]
    status, group = _request(url + "/groups/api-group")
    assert group["members"] == [] and group["lag"] == 7 - 2
    _wait(lambda: any(g["group"] == "api-group" for g in _request(url + "/groups")[1]), 10, "the group listed")
    # the list's lag comes from the sampler, which asks every group's committed offsets at once
    _wait(lambda: next(g for g in _request(url + "/groups")[1] if g["group"] == "api-group")["lag"] == 7 - 2, 30,
          "the sampled lag of api-group")
    _wait(lambda: len(_request(url + "/overview")[1]["throughput"]["total"]) >= 2, 15, "two throughput samples")

    status, body = _request(url + "/topics/api-topic", "DELETE")
    assert status == 200
    status, body = _request(url + "/topics/api-topic")
    assert status == 404
    status, body = _request(url + "/nothing-here")
    assert status == 404


@pytest.mark.timeout(90)
def test_share_groups_in_the_json_api_and_the_page(broker_factory, console_factory, page):
    """A share group (KIP-932) is listed with type `share`; its page has members, start offset and lag."""
    from playwright.sync_api import expect

    from tests.interop.test_share_groups import close_quietly, poll_records, prepared_group, share_consumer

    broker = broker_factory()
    console = console_factory(broker.bootstrap)
    url = console.url + "/api"
    group = prepared_group(broker.bootstrap, "share-api", 4)
    consumer = share_consumer(broker.bootstrap, group)
    try:
        consumer.subscribe(["share-api"])
        assert len(poll_records(consumer, 4, 20)) == 4
        consumer.poll(0.5)  # implicit mode: the next poll accepts the records of the last one
        listed = _wait(lambda: [g for g in _request(url + "/groups")[1] if g["group"] == group], 15, "the group listed")
        assert (listed[0]["type"], listed[0]["state"]) == ("share", "STABLE")
        status, described = _request(url + f"/groups/{group}")
        assert status == 200 and described["type"] == "share" and len(described["members"]) == 1
        assert [(p["topic"], p["partition"]) for p in described["partitions"]] == [("share-api", 0)]
        assert described["partitions"][0]["member"] == described["members"][0]["member_id"]
        page.goto(console.url + "/#/groups")
        row = page.get_by_test_id("group-row").filter(has_text=group)
        expect(row.get_by_test_id("group-type")).to_have_text("share", timeout=TIMEOUT_MS)
        page.get_by_role("link", name=group).click()
        expect(page.get_by_test_id("members-count")).to_have_text("1", timeout=TIMEOUT_MS)
        expect(page.get_by_test_id("group-partition-row")).to_have_count(1)
    finally:
        close_quietly(consumer)
    _wait(lambda: _request(url + f"/groups/{group}")[1]["partitions"][0]["start_offset"] == 4, 15,
          "the accepted records behind the start offset")
    expect(page.get_by_test_id("start-offset")).to_have_text("4", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("members-count")).to_have_text("0", timeout=TIMEOUT_MS)
    screenshot(page, "share-group")


def test_topic_produce_and_browse(broker_factory, console_factory, page):
    from playwright.sync_api import expect

    broker = broker_factory()
    console = console_factory(broker.bootstrap)
    page.goto(console.url + "/")
    expect(page.get_by_test_id("brokers-count")).to_have_text("1", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("topics-count")).to_have_text("0")

    # create a topic through the UI
    page.get_by_role("link", name="Topics").click()
    form = page.get_by_test_id("create-topic")
    form.locator("input[name=name]").fill("orders")
    form.locator("input[name=partitions]").fill("3")
    form.get_by_role("button", name="Create topic").click()
    expect(page.get_by_test_id("topic-row").filter(has_text="orders")).to_be_visible(timeout=TIMEOUT_MS)
    _produce(broker.bootstrap, "payments", [b"p"])  # auto-created: a second topic for the search
    page.get_by_test_id("topic-search").fill("pay")
    expect(page.get_by_test_id("topic-row")).to_have_count(1, timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("topic-row")).to_contain_text("payments")
    page.get_by_test_id("topic-search").fill("")
    expect(page.get_by_test_id("topic-row")).to_have_count(2)
    screenshot(page, "topics")

    # produce through the form
    page.get_by_role("link", name="Produce").click()
    page.get_by_test_id("produce-topic").select_option("orders")
    page.get_by_test_id("produce-key").fill("order-17")
    page.get_by_test_id("produce-value").fill('{"id":17,"items":["tea","cups"],"total":12.5}')
    page.get_by_test_id("produce-partition").fill("2")
    page.get_by_test_id("add-header").click()
    page.locator(".headers-list .hk").fill("origin")
    page.locator(".headers-list .hv").fill("web-console")
    screenshot(page, "produce")
    page.get_by_test_id("produce-submit").click()
    expect(page.get_by_test_id("produce-result")).to_contain_text("partition 2 at offset 0", timeout=TIMEOUT_MS)
    _produce(broker.bootstrap, "orders", [json.dumps({"id": i, "items": ["spoon"], "total": i}).encode()
                                          for i in range(3)], key=b"bulk")

    # the partition table
    page.goto(console.url + "/#/topics/orders")
    expect(page.get_by_test_id("partition-row")).to_have_count(3, timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("topic-messages")).to_have_text("4", timeout=TIMEOUT_MS)
    screenshot(page, "topic-partitions")
    page.get_by_test_id("tab-configs").click()
    page.get_by_label("Show defaults too").check()
    expect(page.get_by_test_id("configs")).to_contain_text("retention.ms", timeout=TIMEOUT_MS)
    screenshot(page, "topic-configs")

    # the message browser: from the beginning, filtered by key, as text then as JSON
    page.get_by_test_id("tab-messages").click()
    expect(page.get_by_test_id("message-row")).to_have_count(4, timeout=TIMEOUT_MS)
    page.get_by_test_id("mb-start").select_option("beginning")
    page.get_by_test_id("mb-key").fill("order-17")
    page.get_by_test_id("mb-load").click()
    row = page.get_by_test_id("message-row")
    expect(row).to_have_count(1, timeout=TIMEOUT_MS)
    expect(row.get_by_test_id("message-key")).to_have_text("order-17")
    expect(row.get_by_test_id("message-value")).to_have_text('{"id":17,"items":["tea","cups"],"total":12.5}')
    expect(row).to_contain_text("origin: web-console")
    page.get_by_test_id("mb-format").select_option("json")
    pretty = json.dumps({"id": 17, "items": ["tea", "cups"], "total": 12.5}, indent=2)
    expect(row.get_by_test_id("message-value")).to_have_text(pretty)
    page.get_by_test_id("mb-format").select_option("hex")
    expect(row.get_by_test_id("message-value")).to_contain_text("000000  7b 22 69 64")
    page.get_by_test_id("mb-format").select_option("json")
    # a filter on the content, from an offset
    page.get_by_test_id("mb-key").fill("")
    page.get_by_test_id("mb-value").fill("spoon")
    page.get_by_test_id("mb-start").select_option("offset")
    page.get_by_test_id("mb-offset").fill("1")
    page.get_by_test_id("mb-load").click()
    expect(page.get_by_test_id("message-row")).to_have_count(2, timeout=TIMEOUT_MS)  # offsets 1 and 2 of bulk
    # live tail: a record produced now appears without reloading
    page.get_by_test_id("mb-value").fill("")
    page.get_by_test_id("mb-start").select_option("end")
    page.get_by_test_id("mb-load").click()
    expect(page.get_by_test_id("message-row")).to_have_count(4, timeout=TIMEOUT_MS)
    page.get_by_test_id("mb-tail").check()
    _produce(broker.bootstrap, "orders", [b'{"id": 99, "note": "live"}'], key=b"tail")
    expect(page.get_by_test_id("message-row")).to_have_count(5, timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("message-value").last).to_contain_text('"note": "live"')
    page.get_by_test_id("mb-tail").uncheck()
    screenshot(page, "topic-messages", "console-topic.png")

    # the overview counts both topics and shows the throughput that was sampled
    page.get_by_role("link", name="Overview").click()
    expect(page.get_by_test_id("topics-count")).to_have_text("2", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("partitions-count")).to_have_text("4")
    expect(page.get_by_test_id("throughput-chart").locator("polyline")).to_have_count(1, timeout=TIMEOUT_MS)
    screenshot(page, "overview", "console-overview.png")

    # delete a topic through the UI
    page.goto(console.url + "/#/topics/payments")
    page.once("dialog", lambda d: d.accept())
    page.get_by_test_id("delete-topic").click()
    expect(page.get_by_test_id("topic-row")).to_have_count(1, timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("topic-row")).to_contain_text("orders")


def test_group_lag_falls_and_reset(broker_factory, console_factory, page):
    from playwright.sync_api import expect

    broker = broker_factory()
    console = console_factory(broker.bootstrap)
    total = 40
    _produce(broker.bootstrap, "events", [f"event {i}".encode() for i in range(total)])
    consumer = SlowConsumer(broker.bootstrap, "slow-readers", "events", delay_s=0.3)
    try:
        page.goto(console.url + "/#/groups")
        expect(page.get_by_test_id("group-row").filter(has_text="slow-readers")).to_be_visible(timeout=TIMEOUT_MS)
        page.get_by_role("link", name="slow-readers").click()
        expect(page.get_by_test_id("members-count")).to_have_text("1", timeout=TIMEOUT_MS)
        lag = page.get_by_test_id("group-lag")

        def lag_value() -> int | None:
            text = lag.inner_text().replace(",", "")
            return int(text) if re.fullmatch(r"\d+", text) else None

        first = _wait(lambda: (v := lag_value()) is not None and 0 < v < total and v, 30, "a first lag")
        screenshot(page, "group-consuming")
        _wait(lambda: (v := lag_value()) is not None and v < first, 30, f"the lag to fall below {first}")
        expect(lag).to_have_text("0", timeout=40_000)
        assert consumer.consumed == total
        expect(page.get_by_test_id("lag-chart").locator("polyline")).to_have_count(1, timeout=TIMEOUT_MS)
        expect(page.get_by_test_id("reset-submit")).to_be_disabled()
        screenshot(page, "group-caught-up")
    finally:
        consumer.stop()

    # stopped: no members, so the offsets can be reset
    expect(page.get_by_test_id("members-count")).to_have_text("0", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("reset-submit")).to_be_enabled()
    page.get_by_test_id("reset-to").select_option("earliest")
    page.once("dialog", lambda d: d.accept())
    page.get_by_test_id("reset-submit").click()
    expect(page.get_by_test_id("toast").filter(has_text="Reset 1 partition(s)")).to_be_visible(timeout=TIMEOUT_MS)
    expect(lag).to_have_text(str(total), timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("committed")).to_have_text("0")
    screenshot(page, "group-reset")
    page.get_by_role("link", name="Consumer groups").first.click()
    expect(page.get_by_test_id("group-row")).to_contain_text("slow-readers", timeout=TIMEOUT_MS)
    screenshot(page, "groups")
