"""The answer to ``initialize`` before the language server is loaded.

Importing pygls and lsprotocol is most of a start (0.7-0.9 s on the reference machine,
notes in docs/daemon.md), and the answer to ``initialize`` depends on nothing but the
client's capabilities and this installation. So the answer pygls gave is kept, per
installation and per client capabilities, in the user's cache; a later start with the same
editor reads the first message itself, answers from there at once, then loads the server.
The server still handles that ``initialize`` (its workspace, the client's capabilities, the
editor's process): its own answer is checked against the one sent instead of being sent
again, and a difference drops the kept answer and is logged.

Nothing here imports pygls, lsprotocol or the engine: only the standard library. A first
start with an editor, a cache that cannot be read or written, an input that does not begin
with a well-formed ``initialize``: the start goes as it would without this module, and the
bytes read are handed to the message loop untouched.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mplp_lsp import __version__
from mplp_lsp.engine.private import (
    check_private_dir,
    make_private_dir,
    read_private,
    write_private,
)

__all__ = ["CACHE_ENV", "EarlyStart", "answer_early", "cache_dir"]

log = logging.getLogger(__name__)

CACHE_ENV: Final = "MPLP_LSP_CACHE_DIR"
_HEADER_LIMIT: Final = 8192  # bytes of header lines; a client sends about 30
_BODY_LIMIT: Final = 2**22  # an initialize is a few KiB; a larger one goes the usual way
_ANSWER_LIMIT: Final = 2**20  # the identity holds the client capabilities: tens of KiB
_KEPT: Final = 16  # answers kept: one per editor (and editor version) in use
# What shapes the answer: the server's features (lsp/), pygls's capability builder and
# lsprotocol's types. Their files' sizes and times name the installation.
_SHAPING: Final = (
    ("mplp_lsp", "lsp"),
    ("pygls", "capabilities.py"),
    ("pygls", "protocol/language_server.py"),
    ("lsprotocol", "types.py"),
)
# InitializeParams (LSP 3.17) with each field's JSON types: an initialize whose fields all
# fit is one pygls takes, so answering it early cannot promise what pygls then refuses.
_PARAMS: Final[dict[str, tuple[type, ...]]] = {
    "processId": (int, type(None)),
    "clientInfo": (dict,),
    "locale": (str,),
    "rootPath": (str, type(None)),
    "rootUri": (str, type(None)),
    "initializationOptions": (object,),
    "capabilities": (dict,),
    "trace": (str,),
    "workspaceFolders": (list, type(None)),
    "workDoneToken": (int, str),
}
_TRACES: Final = frozenset({"off", "messages", "verbose"})


@dataclass
class EarlyStart:
    """What was read of the input before the server was loaded, and what was answered."""

    prefix: bytes = b""  # the message loop reads these first
    request_id: int | str | None = None  # the initialize read, if the input began with one
    answer_file: Path | None = None  # where this client's answer is kept
    identity: str = ""  # what that answer depends on (:func:`_identity`)
    sent: Any = field(default=None)  # the result sent early; None: not answered
    # Ends the session (the message loop sets it): for an answer the server cannot stand by.
    stop: Callable[[], None] = field(default=lambda: None)

    def settle(self, result: Any) -> bool:
        """The server's own result for the initialize: True if it was answered already
        (nothing more to send), False if the server sends it (and it is kept for later)."""
        if self.sent is None:
            if self.answer_file is not None and result is not None:
                _keep(self.answer_file, self.identity, result)
            return False
        if result != self.sent:
            log.warning(
                "the answer to initialize kept from an earlier start differed from this"
                " server's; it is dropped (the editor got the earlier one)"
            )
            _forget(self.answer_file)
        return True

    def refused(self, reason: str) -> None:
        """The server refused the initialize answered early: the editor believes in a
        session this server does not have. It ends, and says why."""
        log.error("the initialize answered at the start was refused by the server: %s", reason)
        self.stop()


def cache_dir() -> Path:
    """``$MPLP_LSP_CACHE_DIR``, else ``$XDG_CACHE_HOME/mplp-lsp`` (an absolute one: the XDG
    specification ignores a relative one), else ``~/.cache/mplp-lsp``."""
    if chosen := os.environ.get(CACHE_ENV):
        return Path(chosen)
    base = Path(os.environ.get("XDG_CACHE_HOME") or ".")
    return (base if base.is_absolute() else Path.home() / ".cache") / "mplp-lsp"


def answer_early(stdin: int, stdout: int) -> EarlyStart:
    """Read the first message from ``stdin``; if it is an ``initialize`` whose answer is
    kept, write that answer to ``stdout``."""
    prefix, body = _read_message(stdin)
    start = EarlyStart(prefix)
    request = _initialize(body)
    if request is None:
        return start
    start.request_id, capabilities = request
    try:
        start.identity = _identity(capabilities)
        # The name is a checksum; the file holds the whole identity, compared on reading.
        name = f"{zlib.crc32(start.identity.encode('utf-8', 'surrogatepass')):08x}.json"
        start.answer_file = cache_dir() / "initialize" / name
        result = _kept(start.answer_file, start.identity)
    except (OSError, ValueError, RuntimeError) as error:  # no home, a refused folder
        log.debug("no early answer to initialize: %s", error)
        return start
    if result is not None:
        _write_message(stdout, {"id": start.request_id, "jsonrpc": "2.0", "result": result})
        start.sent = result
    return start


def _read_message(fd: int) -> tuple[bytes, bytes | None]:
    """One message's bytes as read, and its body (None if the input does not begin with a
    whole message within the limits). Reads no further than that message."""
    head = bytearray()
    while not head.endswith(b"\r\n\r\n"):
        if len(head) >= _HEADER_LIMIT or not (byte := os.read(fd, 1)):
            return bytes(head), None
        head += byte
    length = _content_length(bytes(head))
    if length is None or length > _BODY_LIMIT:
        return bytes(head), None
    body = bytearray()
    while len(body) < length:
        if not (chunk := os.read(fd, length - len(body))):
            return bytes(head + body), None
        body += chunk
    return bytes(head + body), bytes(body)


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


def _initialize(body: bytes | None) -> tuple[int | str, dict[str, Any]] | None:
    """The id and client capabilities of an ``initialize`` request pygls will take."""
    if body is None:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    ident, params = message.get("id"), message.get("params")
    if (
        message.get("jsonrpc") != "2.0"
        or isinstance(ident, bool)
        or not isinstance(ident, int | str)
        or not isinstance(params, dict)
        or not _plain_params(params)
    ):
        return None
    return ident, params["capabilities"]


def _plain_params(params: dict[str, Any]) -> bool:
    if "capabilities" not in params or not set(params) <= set(_PARAMS):
        return False
    if not all(isinstance(params[name], _PARAMS[name]) for name in params):
        return False
    if isinstance(params.get("processId"), bool) or params.get("trace", "off") not in _TRACES:
        return False
    client = params.get("clientInfo", {"name": ""})
    folders = params.get("workspaceFolders") or []
    return (
        isinstance(client.get("name"), str)
        and set(client) <= {"name", "version"}
        and isinstance(client.get("version", ""), str)
        and all(
            isinstance(folder, dict)
            and set(folder) == {"uri", "name"}
            and all(isinstance(value, str) for value in folder.values())
            for folder in folders
        )
    )


def _identity(capabilities: dict[str, Any]) -> str:
    """What the answer depends on: this installation and the client's capabilities."""
    return json.dumps(
        [__version__, sys.version, _installation(), capabilities],
        sort_keys=True,
        separators=(",", ":"),
    )


def _installation() -> list[tuple[str, int, int]]:
    found = []
    for package, inside in _SHAPING:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"{package} is not installed")
        path = Path(next(iter(spec.submodule_search_locations))) / inside
        files = sorted(path.glob("*.py")) if path.is_dir() else [path]
        for file in files:
            info = file.stat()
            found.append((f"{package}/{file.name}", info.st_size, info.st_mtime_ns))
    return found


def _kept(path: Path, identity: str) -> Any:
    """The answer kept in ``path`` for ``identity``, or None."""
    try:
        check_private_dir(path.parent, what="the cache folder")
        data = read_private(path, _ANSWER_LIMIT)
    except FileNotFoundError:
        return None
    found = json.loads(data)
    if not isinstance(found, dict) or found.get("identity") != identity:
        return None  # another installation or client with the same checksum: replaced later
    result = found.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("capabilities"), dict):
        raise ValueError(f"{path} does not hold an answer to initialize")
    return result


def _keep(path: Path, identity: str, result: Any) -> None:
    try:
        make_private_dir(path.parent, what="the cache folder")
        kept = {"identity": identity, "result": result}
        write_private(path, json.dumps(kept, separators=(",", ":")).encode())
        older = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for old in older[:-_KEPT]:
            old.unlink(missing_ok=True)
    except (OSError, ValueError) as error:
        log.debug("the answer to initialize is not kept: %s", error)


def _forget(path: Path | None) -> None:
    if path is not None:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            log.debug("could not drop %s: %s", path, error)


def _write_message(fd: int, message: dict[str, Any]) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    data = b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    while data:
        data = data[os.write(fd, data) :]
