"""The local dashboard in a real browser against a real `mplp-lsp watch` daemon."""

from __future__ import annotations

import csv
import json
import re
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.otlp import Receiver
from tests.support.waiting import wait_until
from tests.ui.daemon import Remote, Watch, cli

pytestmark = pytest.mark.realhost


@pytest.fixture(scope="module")
def page(browser: Any, daemon: Watch) -> Any:
    """One logged-in tab for the module, opened with the link `mplp-lsp ui` printed."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(daemon.login_link())
    tab.wait_for_selector("body[data-timeline-rendered]")
    tab.wait_for_selector("#live-state.on")
    yield tab
    assert errors == [], errors  # no script error on the page, CSP refusals included
    context.close()


def shows(page: Any, expression: str) -> None:
    """Wait until ``expression`` is true in the page. Playwright's wait_for_function polls
    with eval, which the page's CSP refuses (as it should)."""
    wait_until(lambda: page.evaluate(expression), timeout=15, what=expression)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    return _call(urllib.request.Request(url, headers=headers or {}))


def _post(url: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **headers}
    return _call(urllib.request.Request(url, data=data, headers=headers, method="POST"))


def _call(request: urllib.request.Request) -> tuple[int, dict[str, str], Any]:
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def test_the_login_page_opens_the_dashboard_once(browser: Any, daemon: Watch, page: Any) -> None:
    assert page.url == f"{daemon.url}/ui/"
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies[f"mplp_ui_{daemon.url.rsplit(':', 1)[1]}"]
    assert (session["httpOnly"], session["sameSite"]) == (True, "Strict")
    assert not any(name.startswith("mplp_login_") for name in cookies)  # the nonce is spent
    token = (daemon.state_dir / "api-token").read_text()
    assert token not in page.content()
    assert page.evaluate("document.cookie") == ""  # page script cannot read the session
    # What `mplp-lsp ui` printed is a private file, not a link that logs anyone in.
    link = daemon.login_link()
    assert link.startswith("file://") and "code" not in link
    written = daemon.state_dir / "ui-login.html"
    assert oct(written.stat().st_mode & 0o777) == "0o600"
    # The page's code is spent by the first browser: a second one gets the login page.
    other = browser.new_context()
    try:
        first = other.new_page()
        first.goto(link)
        first.wait_for_url(f"{daemon.url}/ui/")
        again = other.new_page()
        again.goto(link)
        again.wait_for_selector("#login-state.error")
        assert again.url == f"{daemon.url}/ui/login"  # the code left the address bar
        said = again.inner_text("#login-state")
        assert "This login link was already used or has expired" in said
        assert "This browser is logged in" in said  # pointed to, not sent to, the dashboard
        again.click("#login-state a")
        again.wait_for_url(f"{daemon.url}/ui/")
    finally:
        other.close()
    # A browser with no session (the link copied elsewhere) is told how to get a new one.
    fresh = browser.new_context()
    try:
        tab = fresh.new_page()
        tab.goto(link)
        tab.wait_for_selector("#login-state.error")
        said = tab.inner_text("#login-state")
        assert "already used or has expired" in said and "mplp-lsp ui --open" in said
        assert not any(c["name"].startswith("mplp_ui_") for c in fresh.cookies())
    finally:
        fresh.close()


def test_a_typed_code_logs_in_and_a_code_alone_opens_nothing(browser: Any, daemon: Watch) -> None:
    done = cli(
        daemon.env, "ui", "--state-dir", str(daemon.state_dir), "--workspace", str(daemon.workspace)
    )
    code = done.stderr.rsplit("enter the code ", 1)[1].strip()
    # Without the login page's nonce (a client that never loaded it), the code is refused,
    # and it stays good for the browser.
    status, _, body = _post(
        f"{daemon.url}/ui/login", {"code": code}, {"Sec-Fetch-Site": "same-origin"}
    )
    assert (status, body["errors"][0]["path"]) == (401, "code")
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.goto(f"{daemon.url}/ui/login")
        tab.fill("#code", code)
        tab.click("#login button")
        tab.wait_for_url(f"{daemon.url}/ui/")
    finally:
        context.close()


def test_a_request_without_a_session_or_with_a_wrong_one_is_refused(daemon: Watch) -> None:
    for headers in ({}, {"Cookie": f"mplp_ui_{daemon.url.rsplit(':', 1)[1]}=forged"}):
        status, answer_headers, body = _get(f"{daemon.url}/ui/api/timeline", headers)
        assert status == 401
        assert body["ok"] is False and body["errors"][0]["code"]  # the API's error shape
        assert answer_headers["X-Frame-Options"] == "DENY"
    status, _, _ = _get(f"{daemon.url}/ui/")
    assert status == 401


def test_the_page_has_a_strict_csp_and_cannot_be_framed(
    browser: Any, daemon: Watch, page: Any
) -> None:
    # Playwright's own requests carry the page's cookies but no Sec-Fetch-Site, as curl with
    # a stolen cookie would: refused, and the refusal has the headers too.
    response = page.request.get(f"{daemon.url}/ui/")
    assert response.status == 401
    csp = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    # The page's own fetch of a streamed answer.
    ok, streamed_csp = page.evaluate(
        "fetch('/ui/api/export?format=csv')"
        ".then(r => [r.ok, r.headers.get('content-security-policy')])"
    )
    assert ok and streamed_csp == csp
    # A page of another origin that frames the dashboard gets nothing of it.
    framing = page.context.new_page()
    try:
        framing.set_content(f'<iframe id="f" src="{daemon.url}/ui/"></iframe>')
        framing.wait_for_timeout(1000)
        frame = framing.frame_locator("#f")
        assert frame.locator("#timeline-canvas").count() == 0
    finally:
        framing.close()


def test_events_of_the_watch_session_appear_live(daemon: Watch, page: Any, pictures: Path) -> None:
    (daemon.workspace / "live.txt").write_text("written while the page is open\n")
    page.wait_for_selector("#live-events li[data-kind=file_update]", timeout=30_000)
    shows(page, "document.querySelector('#range').textContent.includes('events in')")
    # A bucket of the editor lane lists its events; one of them shows its envelope.
    # With the keyboard, from the latest bucket back to one that has editor events.
    page.locator("#timeline-canvas").focus()
    page.keyboard.press("End")
    for _ in range(20):
        page.keyboard.press("Enter")
        page.wait_for_selector("#bucket-events li:not(:has-text('loading'))")
        if page.locator("#bucket-events button").count():
            break
        page.keyboard.press("ArrowLeft")
    # Each event of the list says what happened to which file.
    files = {"notes.txt", "README.md", "live.txt"}
    for line in page.locator("#bucket-events button").all_inner_texts():
        assert re.search(r" (created|modified) (\S+)$", line) and line.split()[-1] in files, line
    # "buckets of 1 second", "buckets of 10 seconds": one count per unit.
    assert re.search(r"buckets of (1 [a-z]+|\d+ [a-z]+s)$", page.inner_text("#range")), (
        page.inner_text("#range")
    )
    page.locator("#bucket-events button").first.click()
    envelope = json.loads(page.inner_text("#envelope"))
    assert envelope["event_family"] == "ExternalIntegrationEvent"
    page.screenshot(path=str(pictures / "ui-local.png"), full_page=False)


def test_a_drift_finding_is_resolved_from_the_page(daemon: Watch, page: Any) -> None:
    finding = page.locator('.finding[data-path="notes.txt"]')
    finding.wait_for()
    finding.locator('button[data-strategy="psg"]').click()
    wait_until(
        lambda: (daemon.workspace / "notes.txt").read_text() == "as recorded\n",
        what="the recorded content back on disk",
    )
    page.wait_for_selector('.finding[data-path="notes.txt"]', state="detached", timeout=15_000)


def test_a_dead_letter_is_requeued_from_the_page(daemon: Watch, page: Any, remote: Remote) -> None:
    # The remote refused every batch (403): the events are dead letters.
    wait_until(lambda: daemon.get("/ui/api/forwarding")["dead_letters"], what="dead letters")
    page.reload()
    page.wait_for_selector("#forwarding-body button[data-seq]")
    # The remote's address in full, breakable after its separators only (never mid-word).
    remote_url = daemon.get("/ui/api/forwarding")["status"]["remote"]
    card = page.locator('#forwarding-body section.sink[data-sink="collector"] .card.wide b')
    assert card.inner_text().replace("\n", "") == remote_url
    assert card.evaluate("b => b.querySelectorAll('wbr').length") >= remote_url.count("/")
    collector_letters = page.locator('#forwarding-body button[data-sink="collector"]')
    seq = int(collector_letters.first.get_attribute("data-seq"))
    remote.status = 200
    page.locator(f'#forwarding-body button[data-seq="{seq}"][data-sink="collector"]').click()
    wait_until(lambda: remote.stored, timeout=60, what="the requeued envelope at the remote")
    assert [item["seq"] for item in remote.stored] == [seq]
    letters = daemon.get("/ui/api/forwarding")["dead_letters"]
    assert (seq, "collector") not in [(letter["seq"], letter["sink"]) for letter in letters]


def test_each_sink_has_its_block_and_its_dead_letters_are_requeued_to_it(
    daemon: Watch, page: Any, otlp: Receiver
) -> None:
    # The OTLP receiver refused every batch (403): dead letters of the otlp sink too.
    def otlp_letters() -> list[dict[str, Any]]:
        letters = daemon.get("/ui/api/forwarding")["dead_letters"]
        return [letter for letter in letters if letter["sink"] == "otlp"]

    wait_until(otlp_letters, what="the otlp sink's dead letters")
    page.reload()
    page.wait_for_selector('#forwarding-body button[data-sink="otlp"]')
    assert page.locator('#forwarding-body section.sink[data-sink="collector"]').count() == 1
    block = page.locator('#forwarding-body section.sink[data-sink="otlp"]')
    assert block.locator("h3").inner_text() == "Sink: otlp"
    assert block.locator(".card.wide b").inner_text().replace("\n", "") == otlp.url
    button = page.locator('#forwarding-body button[data-sink="otlp"]').first
    seq = int(button.get_attribute("data-seq"))
    [letter] = [letter for letter in otlp_letters() if letter["seq"] == seq]
    otlp.status = 200
    button.click()
    wait_until(
        lambda: letter["event_id"] in otlp.event_ids(), timeout=60, what="the requeued record"
    )
    assert otlp.event_ids().count(letter["event_id"]) == 1
    assert seq not in [letter["seq"] for letter in otlp_letters()]


def test_a_plans_steps_show_in_dependency_order_with_live_status(daemon: Watch, page: Any) -> None:
    meta = {"protocol_version": "1.0.0", "schema_version": "1.0.0"}
    context = str(uuid.uuid4())
    daemon.post(
        "/psg/contexts",
        {
            "meta": meta,
            "context_id": context,
            "title": "demo",
            "status": "active",
            "root": {"domain": "software", "environment": "dev"},
        },
    )
    build, test, deploy = (str(uuid.uuid4()) for _ in range(3))
    plan = str(uuid.uuid4())
    # Listed out of order: deploy first, though it waits for test, which waits for build.
    steps = [
        {
            "step_id": deploy,
            "description": "deploy",
            "status": "pending",
            "order_index": 0,
            "dependencies": [test],
        },
        {"step_id": build, "description": "build", "status": "pending", "order_index": 1},
        {
            "step_id": test,
            "description": "test",
            "status": "pending",
            "order_index": 2,
            "dependencies": [build],
        },
    ]
    daemon.post(
        "/psg/plans",
        {
            "meta": meta,
            "plan_id": plan,
            "context_id": context,
            "title": "Release 1.2",
            "objective": "ship",
            "status": "draft",
            "steps": steps,
        },
    )
    listed = page.locator(".plan", has_text="Release 1.2").locator("ol.steps li")
    listed.first.wait_for(timeout=15_000)
    assert [text.split()[1] for text in listed.all_inner_texts()] == ["build", "test", "deploy"]
    for status in ("proposed", "approved", "in_progress"):
        daemon.patch(f"/psg/plans/{plan}/status", {"status": status})
    daemon.patch(f"/psg/plans/{plan}/steps/{build}/status", {"status": "in_progress"})
    # No reload: the live stream brings the change.
    shows(
        page,
        "[...document.querySelectorAll('.plan ol.steps li')].some("
        "li => li.textContent.startsWith('in_progress build'))",
    )


def test_the_event_log_is_exported_from_the_page(daemon: Watch, page: Any) -> None:
    stored = daemon.get("/events?limit=1000")["events"]
    form = page.locator("#export-form")
    with page.expect_download() as download:
        form.locator("button[type=submit]").click()
    lines = Path(download.value.path()).read_text().splitlines()
    exported = [json.loads(line) for line in lines]
    assert sorted(e["envelope"]["event_id"] for e in exported) == sorted(
        e["envelope"]["event_id"] for e in stored
    )
    # In the order the events happened: each line's timestamp is the event's own time.
    assert [e["timestamp"] for e in exported] == sorted(e["timestamp"] for e in exported)
    # A range, as CSV: only the events that happened in it (UTC, the form's own format).
    first = min(e["timestamp"] for e in exported)
    within = [e for e in exported if e["timestamp"][:19] == first[:19]]
    start = first[:19]
    end = timeline_shift(start, 1)
    form.locator("input[name=from]").fill(start)
    form.locator("input[name=to]").fill(end)
    form.locator("select[name=format]").select_option("csv")
    with page.expect_download() as download:
        form.locator("button[type=submit]").click()
    rows = list(csv.reader(Path(download.value.path()).read_text().splitlines()))
    assert rows[0] == ["seq", "event_id", "kind", "timestamp", "received_at", "envelope"]
    assert sorted(row[1] for row in rows[1:]) == sorted(e["envelope"]["event_id"] for e in within)


def timeline_shift(start: str, seconds: int) -> str:
    moment = datetime.fromisoformat(start) + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def test_the_dashboard_fits_a_phone(page: Any) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.wait_for_timeout(300)  # the chart redraws for the new width
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390
        page.reload()
        page.wait_for_selector("body[data-timeline-rendered]")
        page.keyboard.press("Tab")  # the skip link first: keyboard users reach the content
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})
