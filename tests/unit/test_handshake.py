"""The answer to initialize before the server is loaded (lsp/handshake.py), over real pipes
and a real cache folder: what is read of the input, what is answered, what is kept."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp import __version__
from mplp_lsp.lsp import handshake
from mplp_lsp.lsp.handshake import EarlyStart, answer_early
from tests.support.properties import examples

pytestmark = pytest.mark.unit

RESULT = {"capabilities": {"positionEncoding": "utf-16"}, "serverInfo": {"name": "mplp-lsp"}}
PARAMS: dict[str, Any] = {"processId": 7, "rootUri": "file:///p", "capabilities": {}}


def frame(body: bytes, *, content_type: bool = False) -> bytes:
    head = b"Content-Length: %d\r\n" % len(body)
    if content_type:
        head += b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
    return head + b"\r\n" + body


def initialize(params: Any = PARAMS, ident: Any = 1, **extra: Any) -> bytes:
    message = {"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params, **extra}
    return frame(json.dumps(message).encode())


def exchange(data: bytes) -> tuple[EarlyStart, bytes, bytes]:
    """answer_early over pipes fed ``data`` (then closed): what it returned, what is left
    unread in the input, and what it wrote."""
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()

    def feed() -> None:
        with os.fdopen(write_in, "wb") as pipe:
            pipe.write(data)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        start = answer_early(read_in, write_out)
    finally:
        os.close(write_out)
    with os.fdopen(read_in, "rb") as rest, os.fdopen(read_out, "rb") as written:
        left = rest.read()
        feeder.join()
        return start, left, written.read()


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(handshake.CACHE_ENV, str(folder))
    return folder


def keep_answer(params: dict[str, Any] = PARAMS, result: Any = RESULT) -> Path:
    """What a first start leaves behind for a client with ``params``' capabilities."""
    start, _, written = exchange(initialize(params))
    assert written == b"" and start.answer_file is not None
    assert start.settle(result) is False  # sent by the server, and kept
    return start.answer_file


_BODIES = st.binary(max_size=300) | st.builds(
    lambda v: json.dumps(v).encode(), st.recursive(st.none() | st.integers() | st.text(), st.lists)
)


@settings(max_examples=examples(200), deadline=None)
@given(bodies=st.lists(_BODIES, min_size=1, max_size=4), typed=st.booleans())
def test_the_first_message_is_read_and_nothing_after_it(bodies: list[bytes], typed: bool) -> None:
    messages = [frame(body, content_type=typed) for body in bodies]
    start, left, written = exchange(b"".join(messages))
    assert start.prefix == messages[0]
    assert left == b"".join(messages[1:])
    assert written == b""


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"Content-Length: 10\r\n\r\n{}",  # the input ends inside the body
        b"Content-Length: 2\r\n",  # ... inside the header
        b"Content-Type: x\r\n\r\n{}",  # no length
        b"Content-Length: x\r\n\r\n{}",
        b"X" * 9000,  # a header line without end
        b"Content-Length: %d\r\n\r\n" % (2**23),  # larger than an initialize can be
    ],
)
def test_input_that_is_not_a_whole_message_is_handed_on_untouched(data: bytes) -> None:
    start, left, written = exchange(data)
    assert start.prefix + left == data
    assert start.request_id is None and written == b""


def test_a_kept_answer_is_written_at_once_with_the_request_id() -> None:
    keep_answer()
    start, left, written = exchange(initialize(ident="a-1") + frame(b'{"x": 1}'))
    head, _, body = written.partition(b"\r\n\r\n")
    assert head == b"Content-Length: %d" % len(body)
    assert json.loads(body) == {"id": "a-1", "jsonrpc": "2.0", "result": RESULT}
    assert start.sent == RESULT and start.request_id == "a-1"
    assert left == frame(b'{"x": 1}')  # read by the message loop, as the prefix is


@pytest.mark.parametrize(
    "message",
    [
        initialize({**PARAMS, "processId": "7"}),
        initialize({**PARAMS, "processId": True}),
        initialize({**PARAMS, "rootUri": 3}),
        initialize({**PARAMS, "trace": "loud"}),
        initialize({**PARAMS, "clientInfo": {"name": 1}}),
        initialize({**PARAMS, "clientInfo": {"name": "x", "extra": 1}}),
        initialize({**PARAMS, "workspaceFolders": [{"uri": 1, "name": "p"}]}),
        initialize({**PARAMS, "workspaceFolders": [{"uri": "file:///p"}]}),
        initialize({**PARAMS, "unknownField": 1}),
        initialize({k: v for k, v in PARAMS.items() if k != "capabilities"}),
        initialize([PARAMS]),
        initialize(ident=True),
        initialize(ident=None),
        initialize(jsonrpc="1.0"),
        frame(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}).encode()),
        frame(b"[1, 2]"),
        frame(b"{not json"),
    ],
)
def test_only_an_initialize_the_server_takes_as_it_is_is_answered_early(message: bytes) -> None:
    keep_answer()
    start, _, written = exchange(message)
    assert written == b"" and start.sent is None
    assert start.prefix == message


def test_every_field_of_an_ordinary_initialize_is_taken() -> None:
    params = {
        **PARAMS,
        "clientInfo": {"name": "Neovim", "version": "0.10.1"},
        "locale": "en",
        "rootPath": "/p",
        "initializationOptions": {"notifications": ["mplp/status"]},
        "trace": "off",
        "workspaceFolders": [{"uri": "file:///p", "name": "p"}],
        "workDoneToken": "t",
    }
    keep_answer(params)
    start, _, written = exchange(initialize(params))
    assert start.sent == RESULT and written


def test_an_answer_is_kept_per_client_capabilities(cache: Path) -> None:
    keep_answer()
    other = {**PARAMS, "capabilities": {"general": {"positionEncodings": ["utf-8"]}}}
    start, _, written = exchange(initialize(other))
    assert written == b"" and start.sent is None
    keep_answer(other, {**RESULT, "capabilities": {"positionEncoding": "utf-8"}})
    assert len(list((cache / "initialize").glob("*.json"))) == 2
    assert exchange(initialize(other))[0].sent == {
        **RESULT,
        "capabilities": {"positionEncoding": "utf-8"},
    }
    assert exchange(initialize())[0].sent == RESULT


def test_a_file_of_the_same_name_for_another_installation_is_not_used() -> None:
    kept = keep_answer()
    data = json.loads(kept.read_text())
    data["identity"] = data["identity"].replace(__version__, "0.0.0-other")
    kept.write_text(json.dumps(data))
    start, _, written = exchange(initialize())
    assert written == b"" and start.sent is None
    start.settle(RESULT)  # the server's answer replaces it
    assert exchange(initialize())[0].sent == RESULT


@pytest.mark.parametrize(
    "damage", ["group-writable", "a link", "not JSON", "no capabilities", "an open folder"]
)
def test_a_kept_answer_that_is_not_safe_or_not_whole_is_not_sent(
    damage: str, tmp_path: Path
) -> None:
    kept = keep_answer()
    if damage == "group-writable":
        kept.chmod(0o620)
    elif damage == "a link":
        target = tmp_path / "elsewhere.json"
        target.write_bytes(kept.read_bytes())
        target.chmod(0o600)
        kept.unlink()
        kept.symlink_to(target)
    elif damage == "not JSON":
        kept.write_text("{")
    elif damage == "an open folder":  # another user could have put it there
        kept.parent.chmod(0o777)
    else:
        data = json.loads(kept.read_text())
        data["result"] = {"serverInfo": {}}
        kept.write_text(json.dumps(data))
    start, _, written = exchange(initialize())
    assert written == b"" and start.sent is None


def test_an_answer_that_differs_from_the_servers_is_dropped(
    cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keep_answer()
    start, _, _ = exchange(initialize())
    assert start.settle({**RESULT, "serverInfo": {"name": "changed"}}) is True  # sent already
    assert "differed" in caplog.text
    assert list((cache / "initialize").glob("*.json")) == []


def test_no_more_answers_are_kept_than_editors_in_use(cache: Path) -> None:
    for n in range(20):
        keep_answer({**PARAMS, "capabilities": {"experimental": {"n": n}}})
    assert len(list((cache / "initialize").glob("*.json"))) == 16


def test_a_cache_folder_others_can_write_keeps_nothing(cache: Path) -> None:
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    start, _, _ = exchange(initialize())
    assert start.settle(RESULT) is False
    assert not (cache / "initialize").exists() or not list((cache / "initialize").iterdir())


def test_an_answer_sent_that_the_server_then_refuses_ends_the_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keep_answer()
    start, _, _ = exchange(initialize())
    stopped: list[bool] = []
    start.stop = lambda: stopped.append(True)
    start.refused("invalid params")
    assert stopped == [True]
    assert "refused by the server: invalid params" in caplog.text


@pytest.mark.parametrize(
    ("chosen", "xdg", "expected"),
    [
        ("/c", "/x", "/c"),
        (None, "/x", "/x/mplp-lsp"),
        (None, "relative", "~/.cache/mplp-lsp"),
        (None, None, "~/.cache/mplp-lsp"),
    ],
)
def test_the_cache_folder_follows_the_xdg_rules(
    chosen: str | None, xdg: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ((handshake.CACHE_ENV, chosen), ("XDG_CACHE_HOME", xdg)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert handshake.cache_dir() == Path(expected).expanduser()
