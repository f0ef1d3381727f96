"""The web console in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

A broker with data (JSON, markup and binary record values, a consumer group with a live member and
lag, a client whose id is markup) serves the console; each page is loaded, its content checked, and
a screenshot saved under the test's tmp path (printed, for a person to look at). Values written by
clients must render as the characters they are: markup in a record value or a client id shows as
text, runs nothing and adds no element. Where chromium or Playwright is missing the tests are
skipped, saying so (CI installs chromium: see .ci/run); ``playwright install`` is never needed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.testing import EmbeddedBroker, wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
XSS_VALUE = "<img src=x onerror=\"window.__owned=1\"><script>window.__owned=2</script>"
XSS_CLIENT = "<svg onload=window.__owned=3>"
TIMEOUT_MS = 15_000

if not Path(CHROMIUM).exists():
    pytest.skip("headless Chromium is not installed (Debian package 'chromium'): the console's browser tests "
                "are skipped here; CI installs it (.ci/run) and runs them", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright (the test extra) is not installed: "
                                     "the console's browser tests are skipped")


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    from kafka import KafkaConsumer, KafkaProducer

    with EmbeddedBroker({"admin.listener": "127.0.0.1:0", "group.initial.rebalance.delay.ms": 0}) as broker:
        broker.create_topic("orders", 3)
        broker.create_topic("ticks", 1)
        broker.produce("orders", [b'{"id": 7, "items": ["tea", "cake"], "paid": true}', XSS_VALUE.encode(),
                                  bytes(range(0, 40))], key=b"customer-7", partition=0,
                       headers=[("trace-id", b"4bf92f35")])
        broker.produce("orders", [b"plain text %d" % i for i in range(20)], partition=1)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id=XSS_CLIENT)
        producer.send("orders", b"from a client with a strange id", partition=2).get(30)
        consumer = KafkaConsumer("orders", bootstrap_servers=broker.bootstrap_servers, group_id="billing",
                                 client_id="billing-app", auto_offset_reset="earliest", enable_auto_commit=False)
        read: list[Any] = []
        # polls of a second: kafka-python 3 can miss a SyncGroup answer that lands as a short poll ends
        wait_for(lambda: read.extend(r for rs in consumer.poll(1000).values() for r in rs) or len(read) >= 24, 30,
                 "the group member did not read the records")
        consumer.commit()
        broker.produce("orders", [b"late-%d" % i for i in range(5)], partition=1)  # lag 5
        try:
            yield broker
        finally:
            consumer.close()
            producer.close(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any, broker: EmbeddedBroker) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.dialogs = []  # type: ignore[attr-defined]
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))  # type: ignore
    page.errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda error: page.errors.append(str(error)))  # type: ignore[attr-defined]
    yield page
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    assert page.dialogs == [] and page.evaluate("window.__owned") is None  # type: ignore[attr-defined]
    context.close()


def visit(page: Any, broker: EmbeddedBroker, hash_: str) -> None:
    page.goto(f"{broker.admin_url}/{hash_}")
    page.wait_for_function("hash => document.body.dataset.ready === hash", arg=hash_)


def screenshot(page: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"\nscreenshot: {path}")


def test_the_overview_shows_the_broker_and_a_live_throughput_plot(page: Any, broker: EmbeddedBroker,
                                                                   tmp_path: Path) -> None:
    visit(page, broker, "#/")
    assert page.inner_text("h1").startswith("Broker 1")
    for round_ in range(3):  # traffic while the page samples /v1/stats every second
        broker.produce("ticks", [b"tick-%d" % round_] * 50)
        page.wait_for_timeout(600)
    page.wait_for_function("() => Number(document.querySelector('[data-testid=stat-records]').textContent"
                           ".replace(/,/g, '')) >= 150")
    painted = page.evaluate("""() => { const c = document.querySelector('canvas.plot');
        const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let colored = 0; for (let i = 0; i < data.length; i += 4) if (data[i + 3] && data[i] !== data[i + 2]) colored++;
        return colored; }""")
    assert painted > 0  # the plot drew its lines
    screenshot(page, tmp_path, "overview")


def test_topics_partitions_and_messages_with_json_binary_and_markup_shown_as_text(
        page: Any, broker: EmbeddedBroker, tmp_path: Path) -> None:
    visit(page, broker, "#/topics")
    assert "orders" in page.inner_text("[data-testid=topics]")
    screenshot(page, tmp_path, "topics")
    page.click("text=orders")
    page.wait_for_selector("[data-testid=record-table]")
    rows = page.locator("[data-testid=partitions] tbody tr")
    assert rows.count() == 3 and rows.nth(0).locator("td").nth(2).inner_text() == "3"
    records = page.locator("[data-testid=record-table] tbody tr")
    assert records.count() == 3
    assert records.nth(0).locator("pre").nth(1).inner_text() == (
        '{\n  "id": 7,\n  "items": [\n    "tea",\n    "cake"\n  ],\n  "paid": true\n}')  # JSON, pretty-printed
    assert "trace-id" in records.nth(0).inner_text() and "customer-7" in records.nth(0).inner_text()
    assert records.nth(1).locator("pre").nth(1).inner_text() == XSS_VALUE  # markup shown as its characters
    assert page.locator("[data-testid=records] img, [data-testid=records] script").count() == 0
    assert "binary, 40 bytes" in records.nth(2).inner_text()
    assert "000000  00 01 02 03" in records.nth(2).inner_text()
    screenshot(page, tmp_path, "topic-orders")
    page.select_option("select[name=partition]", "1")
    page.select_option("select[name=from]", "offset")
    page.fill("input[name=offset]", "18")
    page.fill("input[name=limit]", "3")
    page.click("form[data-testid=browse] button")
    page.wait_for_function("() => document.querySelector('[data-testid=records] p').textContent"
                           ".includes('from offset 18')")
    offsets = page.locator("[data-testid=record-table] tbody tr td:first-child").all_inner_texts()
    assert offsets == ["18", "19", "20"]


def test_groups_with_members_assignments_and_lag_per_partition(page: Any, broker: EmbeddedBroker,
                                                              tmp_path: Path) -> None:
    visit(page, broker, "#/groups")
    assert "billing" in page.inner_text("[data-testid=groups]")
    screenshot(page, tmp_path, "groups")
    page.click("text=billing")
    page.wait_for_selector("[data-testid=offsets]")
    assert page.inner_text("[data-testid=group-state]") == "Stable"
    members = page.inner_text("[data-testid=members]")
    assert "billing-app" in members and "orders: 0, 1, 2" in members
    lag = {cells[1]: cells[4] for cells in (row.locator("td").all_inner_texts()
                                            for row in page.locator("[data-testid=offsets] tbody tr").all())}
    assert lag["1"] == "5" and lag["0"] == "0"
    screenshot(page, tmp_path, "group-billing")


def test_the_fault_panel_injects_lists_and_removes_faults(page: Any, broker: EmbeddedBroker, tmp_path: Path) -> None:
    visit(page, broker, "#/faults")
    page.fill("input[name=count]", "2")
    page.fill("input[name=topic]", "orders")
    page.click("form[data-testid=fault-form] button")
    page.wait_for_function("() => document.querySelector('[data-testid=fault-message]').textContent"
                           ".startsWith('Injected fault')")
    (fault,) = broker.faults.list()
    assert (fault["api"], fault["error"], fault["remaining"], fault["topic"]) == (
        "Produce", "NOT_LEADER_OR_FOLLOWER", 2, "orders")
    page.wait_for_selector("[data-testid=fault-list] table")
    assert "NOT_LEADER_OR_FOLLOWER" in page.inner_text("[data-testid=fault-list]")
    screenshot(page, tmp_path, "faults")
    page.click("[data-testid=fault-list] button")
    page.wait_for_function("() => document.querySelector('[data-testid=fault-list]').textContent"
                           ".includes('No faults in force')")
    assert broker.faults.list() == []
    page.select_option("select[name=kind]", "latency")
    page.fill("input[name=topic]", "")
    page.click("form[data-testid=fault-form] button")  # no delay_ms: the broker says why
    page.wait_for_function("() => document.querySelector('[data-testid=fault-message]').textContent"
                           ".includes('needs delay_ms')")


def test_connections_and_requests_show_client_ids_as_text(page: Any, broker: EmbeddedBroker, tmp_path: Path) -> None:
    visit(page, broker, "#/connections")
    text = page.inner_text("[data-testid=connections]")
    assert XSS_CLIENT in text and "kafka-python" in text
    assert page.locator("[data-testid=connections] svg").count() == 0
    screenshot(page, tmp_path, "connections")
    visit(page, broker, "#/requests")
    page.wait_for_selector("[data-testid=requests]")
    assert "Produce" in page.inner_text("[data-testid=requests]")
    screenshot(page, tmp_path, "requests")
