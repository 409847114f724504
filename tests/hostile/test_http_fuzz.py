"""Every HTTP API endpoint of openapi.json with hypothesis-generated bodies and ids.

The API runs for a real workspace on a thread of its own; the test talks to it over real
HTTP. Every answer must be a documented status with a ValidationResult body (stable codes),
never a 500, never a hang; the API must still be healthy afterwards.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mplp_lsp.api.app import openapi_document
from mplp_lsp.api.server import ApiServer
from mplp_lsp.api.services import ApiServices
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.protocol.result import ErrorCode
from tests.support.properties import examples

CODES = {code.value for code in ErrorCode}
DOCUMENT = openapi_document()


def _answers_json(spec: dict[str, Any]) -> bool:
    """A route whose every documented answer is JSON: not the dashboard's page, assets,
    redirects, downloads or event stream (their refusals are checked in test_listener)."""
    for status, response in spec["responses"].items():
        content = response.get("content", {})
        if status.startswith("3") or set(content) - {"application/json"}:
            return False
    return True


ROUTES = [
    (method.upper(), path, spec)
    for path, methods in DOCUMENT["paths"].items()
    for method, spec in methods.items()
    if _answers_json(spec)
]


class Running:
    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        root = tmp / "ws"
        root.mkdir()
        self.workspace, self.server = self.call(self._start(root, tmp / "state"))

    async def _start(self, root: Path, state: Path) -> tuple[Workspace, ApiServer]:
        workspace = await Workspace.open(root, Settings(), state_dir=state)
        server = ApiServer(
            ApiServices.of(workspace),
            workspace.paths,
        )
        await server.start()
        return workspace, server

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(60)

    def request(self, method: str, path: str, body: bytes | None) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.server.url + path,
            data=body,
            method=method,
            headers={
                "Authorization": f"Bearer {self.server.token}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def close(self) -> None:
        self.call(self.server.stop())
        self.call(self.workspace.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    made = Running(tmp_path_factory.mktemp("http-fuzz"))
    yield made
    made.close()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=15), inner, max_size=6)
    ),
    max_leaves=25,
)
KEYS = st.sampled_from(
    [
        "meta",
        "context_id",
        "plan_id",
        "steps",
        "status",
        "title",
        "file_path",
        "change_type",
        "timestamp",
        "commit_id",
        "ref_name",
        "tool_id",
        "segments",
        "trace_id",
        "root",
        "objective",
    ]
)
SHAPED = st.dictionaries(KEYS, JSON, max_size=8)
BODIES = st.one_of(
    SHAPED.map(lambda d: json.dumps(d).encode()),
    JSON.map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=100),
)
IDS = st.one_of(
    st.uuids(version=4).map(str),
    st.sampled_from(["x", "..", "%2e%2e", "00000000-0000-0000-0000-000000000000", "A" * 300]),
)
QUERIES = st.dictionaries(
    st.sampled_from(["kind", "after", "limit", "x"]), st.text(max_size=12), max_size=3
)


def concrete(path: str, ids: list[str]) -> str:
    for index, name in enumerate(
        ["context_id", "plan_id", "step_id", "confirm_id", "trace_id", "segment_id"]
    ):
        path = path.replace("{" + name + "}", urllib.parse.quote(ids[index % len(ids)], safe=""))
    return path.replace("{kind}", "file")


@settings(max_examples=examples(120), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    route=st.sampled_from(ROUTES),
    kind=st.sampled_from(["file", "git", "ci", "tool", "nope", "..%2f"]),
    ids=st.lists(IDS, min_size=1, max_size=3),
    body=BODIES,
    query=QUERIES,
)
def test_generated_requests_get_documented_answers(
    running: Running,
    route: tuple[str, str, Any],
    kind: str,
    ids: list[str],
    body: bytes,
    query: dict[str, str],
) -> None:
    method, template, spec = route
    path = concrete(template, ids).replace("/integration/file", f"/integration/{kind}")
    if query:
        path += "?" + urllib.parse.urlencode(query)
    sends_body = method in ("POST", "PUT", "PATCH")
    status, answer = running.request(method, path, body if sends_body else None)
    assert status < 500, (method, path, answer)
    if status >= 400:
        assert isinstance(answer, dict) and answer.get("ok") is False, answer
        assert answer["errors"] and all(e["code"] in CODES for e in answer["errors"]), answer
    if status < 400 and kind == "file" and "{" not in template:
        assert str(status) in spec["responses"], (method, template, status)


def test_the_api_is_healthy_after_fuzzing(running: Running) -> None:
    assert running.request("GET", "/health", None)[0] == 200
