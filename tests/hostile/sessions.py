"""HTTP as a script or an attacker makes it: no redirects followed, cookies by hand.

``page_session`` logs in the way the dashboard's login page does (its nonce, then the code
posted with ``Sec-Fetch-Site: same-origin``); against a server that has no such page (older
versions: a GET of ``/ui/login?code=``) it uses that, so a test written for the new rules
fails on the old server for what a session may do, not for how it was obtained.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


class _Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_Stay)


@dataclass
class Answer:
    status: int
    cookies: list[str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    method: str, url: str, *, body: Any = None, headers: dict[str, str] | None = None
) -> Answer:
    """One request; a streamed answer (server-sent events) is read only up to its head."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=10)
    data = None if body is None else json.dumps(body).encode()
    sent = dict(headers or {})
    if data is not None:
        sent.setdefault("Content-Type", "application/json")
    try:
        connection.request(
            method, parts.path + (f"?{parts.query}" if parts.query else ""), data, sent
        )
        response = connection.getresponse()
        streamed = response.getheader("Content-Type", "").startswith("text/event-stream")
        content = b"" if streamed else response.read()
        return Answer(response.status, response.headers.get_all("Set-Cookie") or [], content)
    finally:
        connection.close()


def cookie_header(set_cookies: list[str]) -> str:
    return "; ".join(cookie.split(";", 1)[0] for cookie in set_cookies)


def login_code(url: str, token: str) -> str:
    request = urllib.request.Request(
        f"{url}/ui/login-codes", method="POST", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["code"])


def page_session(url: str, token: str) -> str:
    """A dashboard session's cookie, obtained as the login page obtains it."""
    code = login_code(url, token)
    page = call("GET", f"{url}/ui/login")
    nonce = cookie_header(page.cookies)
    posted = call(
        "POST",
        f"{url}/ui/login",
        body={"code": code},
        headers={"Cookie": nonce, "Sec-Fetch-Site": "same-origin", "Origin": url},
    )
    if posted.status in (404, 405):  # an older server: the code in the link
        posted = call("GET", f"{url}/ui/login?code={code}")
    session = [cookie for cookie in posted.cookies if cookie.startswith("mplp_ui_")]
    assert session, (posted.status, posted.body)
    return cookie_header(session)


def concrete(path: str) -> str:
    """A route's canonical path with every placeholder filled in."""
    fills = {
        "{kind}": "file",
        "{name}": "ui.css",
        "{context_id}": "3f0c5e2a-8b1d-4c6e-9a2f-1b2c3d4e5f60",
        "{plan_id}": "3f0c5e2a-8b1d-4c6e-9a2f-1b2c3d4e5f61",
        "{step_id}": "3f0c5e2a-8b1d-4c6e-9a2f-1b2c3d4e5f62",
        "{confirm_id}": "3f0c5e2a-8b1d-4c6e-9a2f-1b2c3d4e5f63",
        "{trace_id}": "3f0c5e2a-8b1d-4c6e-9a2f-1b2c3d4e5f64",
        "{segment_id}": "3f0c5e2a-8b1d-4c6e-9a2f-1b2c3d4e5f65",
    }
    for placeholder, value in fills.items():
        path = path.replace(placeholder, value)
    assert "{" not in path, path
    return path
