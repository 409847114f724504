"""``mplp-lsp flow run`` as a real process takes the runtime settings from the resolved
configuration: the llm* settings from the user's file reach a real HTTP endpoint on
127.0.0.1, and vslUrl from the environment names the value state layer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import mplp
from tests.support.plans import context_doc, plan_doc


@pytest.fixture
def chat_endpoint() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Chat(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "auth": self.headers["Authorization"], "body": body})
            reply = json.dumps(
                {"model": body["model"], "choices": [{"message": {"content": "42"}}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Chat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_flow_run_uses_llm_and_vsl_settings(
    tmp_path: Path, workspace: Path, chat_endpoint: tuple[str, list[dict[str, Any]]]
) -> None:
    base, seen = chat_endpoint
    key = tmp_path / "llm-key"
    key.write_text("sk-from-the-user-file\n")
    xdg = tmp_path / "xdg"
    (xdg / "mplp-lsp").mkdir(parents=True)
    (xdg / "mplp-lsp" / "config.toml").write_text(
        f'llmEndpointUrl = "{base}/v1"\nllmModel = "tiny"\nllmApiKeyFile = "{key}"\n'
    )
    context = context_doc()
    plan = plan_doc(context["context_id"])
    first = plan["steps"][0]["step_id"]
    actions = {first: {"type": "llm", "messages": [{"role": "user", "content": "answer?"}]}}
    for name, doc in (("plan", plan), ("context", context), ("actions", actions)):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    vsl = tmp_path / "values.sqlite3"
    done = mplp(
        workspace,
        *("flow", "run", str(tmp_path / "plan.json"), "--context", str(tmp_path / "context.json")),
        *("--executor", "workspace", "--actions", str(tmp_path / "actions.json")),
        *("--workspace", str(workspace), "--state-dir", str(tmp_path / "state")),
        XDG_CONFIG_HOME=str(xdg),
        MPLP_LSP_VSL_URL=f"sqlite:///{vsl}",
    )
    assert done.returncode == 0, done.stderr
    assert [(s["path"], s["auth"], s["body"]["model"]) for s in seen] == [
        ("/v1/chat/completions", "Bearer sk-from-the-user-file", "tiny")
    ]
    assert vsl.is_file()
    assert "sk-from-the-user-file" not in done.stdout + done.stderr
