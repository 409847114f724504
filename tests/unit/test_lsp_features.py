"""The server's features as pygls sees them, and the pygls behaviours the server relies on.

Messages go through pygls' own message loop (``pygls.io_.run_async``) in this process, so a
pygls release that changes one of these fails here, by name, before any editor test:

- ``structure_message`` is the loop's JSON object hook, and raises ``JsonRpcException`` for
  params that do not fit; ``MplpProtocol`` overrides it to answer such a request
  (``_send_response``, a private method) and to give a request without params a null one;
- a handler registered as a plain ``*args`` function gets the params (or every command
  argument), not the server;
- the options given with a feature reach the ``initialize`` result.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mplp_lsp.lsp.app import FEATURES, create_server
from mplp_lsp.lsp.drift import SCAN_COMMAND
from mplp_lsp.lsp.feature import Feature, command, handles, register
from mplp_lsp.lsp.hooks import INSTALL_COMMAND
from mplp_lsp.lsp.quick_fixes import EDITED_COMMAND, RESOLVE_COMMAND
from mplp_lsp.lsp.server import MplpLanguageServer
from mplp_lsp.lsp.tools import RUN_TOOL_COMMAND
from tests.support.lsp import INITIALIZE, exchange, request


async def test_a_request_with_params_that_do_not_fit_is_answered_with_an_error() -> None:
    bad = request(2, "textDocument/codeAction", {"textDocument": 5})
    sent = await exchange(create_server(), [INITIALIZE, bad], answers=2)
    [answer] = [m for m in sent if m.get("id") == 2]
    assert answer["error"]["code"] in (-32602, -32603)


async def test_a_request_whose_method_is_not_a_string_is_an_invalid_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # lsp-mode and eglot send "method": null when given a name they cannot turn into a symbol
    bad: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": None, "params": None}
    note: dict[str, Any] = {"jsonrpc": "2.0", "method": 7, "params": {}}
    status = request(3, "mplp/status")
    sent = await exchange(create_server(), [INITIALIZE, bad, note, status], answers=3)
    answers = {m["id"]: m for m in sent if "id" in m}
    assert answers[2]["error"]["code"] == -32600
    assert "result" in answers[3]  # and the loop goes on
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_batch_or_a_bare_value_is_refused_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    batch: Any = [request(2, "mplp/status"), request(4, "mplp/status")]
    bare: Any = 7
    sent = await exchange(create_server(), [INITIALIZE, batch, bare, request(3, "mplp/status")], 2)
    assert "result" in {m["id"]: m for m in sent if "id" in m}[3]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_routine_client_messages_are_not_errors(caplog: pytest.LogCaptureFixture) -> None:
    """A cancel for a request already answered, a didChange for a document never opened."""
    cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 99}}
    change = {
        "jsonrpc": "2.0",
        "method": "textDocument/didChange",
        "params": {
            "textDocument": {"uri": "file:///nowhere/x.bin", "version": 2},
            "contentChanges": [{"text": "x"}],
        },
    }
    caplog.set_level(logging.DEBUG)
    await exchange(create_server(), [INITIALIZE, cancel, change, request(2, "mplp/status")], 2)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_request_without_params_is_answered() -> None:
    server = create_server()
    sent = await exchange(server, [INITIALIZE, request(2, "mplp/status", with_params=False)], 2)
    [answer] = [m for m in sent if m.get("id") == 2]
    assert answer["result"]["ready"] is False


async def test_every_feature_reaches_the_initialize_result() -> None:
    operations = {"didCreate": True, "didDelete": True, "didRename": True}
    capable = request(
        1,
        "initialize",
        {
            "processId": None,
            "rootUri": None,
            "capabilities": {"workspace": {"fileOperations": operations}},
        },
    )
    [answer] = await exchange(create_server(), [capable], answers=1)
    capabilities = answer["result"]["capabilities"]
    assert set(capabilities["executeCommandProvider"]["commands"]) >= {
        RESOLVE_COMMAND,
        EDITED_COMMAND,
        SCAN_COMMAND,
        RUN_TOOL_COMMAND,
        INSTALL_COMMAND,
    }
    assert capabilities["diagnosticProvider"]["workspaceDiagnostics"] is True
    assert capabilities["codeActionProvider"]["codeActionKinds"] == ["quickfix"]
    assert capabilities["textDocumentSync"]["save"] == {"includeText": False}
    assert set(capabilities["workspace"]["fileOperations"]) == {
        "didCreate",
        "didDelete",
        "didRename",
    }


async def test_a_command_gets_every_argument_and_no_server() -> None:
    server = create_server()
    server.ready.set()  # no workspace: the command answers at once, naming what it lacks
    run = request(2, "workspace/executeCommand", {"command": RUN_TOOL_COMMAND, "arguments": []})
    sent = await exchange(server, [INITIALIZE, run], answers=3)
    [answer] = [m for m in sent if m.get("id") == 2]
    assert answer["result"]["status"] == "refused"


class _Echo(Feature[MplpLanguageServer]):
    @handles("test/echo")
    async def echo(self, params: Any) -> Any:
        return {"got": params.value, "server": self.server is not None}

    @command("test.args")
    def args(self, *args: Any) -> list[Any]:
        return list(args)


async def test_marked_methods_are_registered_once_each() -> None:
    server = create_server()
    register(server, [_Echo(server)])
    sent = await exchange(
        server,
        [
            INITIALIZE,
            request(2, "test/echo", {"value": 7}),
            request(3, "workspace/executeCommand", {"command": "test.args", "arguments": [1, "b"]}),
        ],
        answers=3,
    )
    answers = {m["id"]: m.get("result") for m in sent if "id" in m}
    assert answers[2] == {"got": 7, "server": True}
    assert answers[3] == [1, "b"]
    with pytest.raises(Exception, match=r"test\.args|test/echo"):
        register(server, [_Echo(server)])


def test_each_feature_is_registered_by_the_server() -> None:
    server = create_server()
    assert [type(f) for f in server.features] == list(FEATURES)
    assert all(len(list(f.handlers())) > 0 for f in server.features)
