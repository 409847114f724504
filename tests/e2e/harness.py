"""Drive a real ``mplp-lsp serve`` process with pytest-lsp's client and read its real store."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client

from tests.support.waiting import wait_until

FAST_SETTINGS = {"debounceMs": 150, "maxWaitMs": 2000}


@dataclass
class Session:
    client: LanguageClient
    workspace: Path
    state_dir: Path
    registrations: list[types.Registration] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)

    def uri(self, relative: str) -> str:
        return (self.workspace / relative).as_uri()

    def open(self, relative: str, text: str, language_id: str = "python") -> None:
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=self.uri(relative), language_id=language_id, version=1, text=text
                )
            )
        )

    def edit(self, relative: str, text: str, version: int = 2) -> None:
        """The editor's buffer now holds ``text`` (a whole-document change)."""
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=self.uri(relative), version=version
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def save(self, relative: str, text: str | None = None) -> None:
        """Write the file (when text is given) and tell the server it was saved."""
        if text is not None:
            path = self.workspace / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.client.text_document_did_save(
            types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=self.uri(relative))
            )
        )

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return read_events(self.state_dir, kind)

    async def wait_for_events(
        self, count: int, kind: str = "file_update", *, timeout: float = 20.0, settle: float = 0.6
    ) -> list[dict[str, Any]]:
        """Wait until at least ``count`` events of ``kind`` are stored, then a quiet moment more."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.events(kind)) >= count:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(settle)  # anything extra would show up now
        return self.events(kind)

    async def status(self) -> dict[str, Any]:
        result = plain(await self.client.protocol.send_request_async("mplp/status", None))
        assert isinstance(result, dict)
        return result


def plain(value: Any) -> Any:
    """pygls hands untyped JSON back as namedtuples; turn them into dicts and lists."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def read_events(state_dir: Path, kind: str | None = None) -> list[dict[str, Any]]:
    database = state_dir / "events.db"
    if not database.exists():
        return []
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT body FROM events WHERE (? IS NULL OR kind = ?) ORDER BY seq", (kind, kind)
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [json.loads(body) for (body,) in rows]


def watch_argv(workspace: Path, state_dir: Path, *extra: str) -> list[str]:
    """The command line of a real ``mplp-lsp watch`` daemon on ``workspace``."""
    return [
        sys.executable,
        "-m",
        "mplp_lsp",
        "watch",
        str(workspace),
        "--state-dir",
        str(state_dir),
        *extra,
    ]


@dataclass
class Watch:
    """A real ``mplp-lsp watch`` process: what it printed (stdout) and logged (stderr)."""

    process: subprocess.Popen[bytes]
    output: Path
    log: Path

    def lines(self) -> list[str]:
        return self.output.read_text(errors="replace").splitlines()

    def logged(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, signum: int = signal.SIGINT, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.process.wait(timeout=timeout)


@contextmanager
def watching(
    workspace: Path,
    state_dir: Path | None,
    *extra: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    api: bool = False,
) -> Iterator[Watch]:
    """``mplp-lsp watch`` on ``workspace``, yielded once every directory is watched; stopped
    with SIGINT at the end unless the test stopped it. ``state_dir=None``: the default one."""
    stem = f"watch-{time.monotonic_ns()}"
    scratch = (state_dir.parent if state_dir is not None else workspace.parent) / stem
    output, log = scratch.with_suffix(".out"), scratch.with_suffix(".log")
    argv = [sys.executable, "-m", "mplp_lsp", "watch", str(workspace), *extra]
    if not api:
        argv.append("--no-api")
    if state_dir is not None:
        argv += ["--state-dir", str(state_dir)]
    with output.open("wb") as sink, log.open("wb") as errors:
        process = subprocess.Popen(argv, stdout=sink, stderr=errors, env=server_env(env), cwd=cwd)
    watch = Watch(process, output, log)
    try:
        wait_until(lambda: "watching" in watch.logged() or process.poll() is not None)
        assert process.poll() is None, watch.logged()
        yield watch
    finally:
        watch.stop()


def file_events(state_dir: Path) -> list[dict[str, Any]]:
    """The payloads of the stored ``file_update`` events, in the order they were stored."""
    return [event["payload"] for event in read_events(state_dir, "file_update")]


def recorded_paths(state_dir: Path) -> set[str]:
    """The paths of the project graph's file nodes."""
    database = state_dir / "events.db"
    if not database.exists():
        return set()
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT path FROM psg_files")}
    except sqlite3.OperationalError:
        return set()
    finally:
        conn.close()


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("MPLP_LSP_STATE_DIR", None)
    return {**env, **(extra or {})}


def editor_capabilities(client_name: str) -> types.ClientCapabilities:
    """pytest-lsp's recorded capabilities of ``client_name``. Its VS Code is 1.65, from before
    LSP 3.17: VS Code's client (vscode-languageclient 8 and later) declares the 3.17 file
    watcher, with which the server lets the editor watch the workspace."""
    capabilities = client_capabilities(client_name)
    watched = capabilities.workspace and capabilities.workspace.did_change_watched_files
    if client_name == "visual-studio-code" and watched:
        watched.relative_pattern_support = True
    return capabilities


@asynccontextmanager
async def lsp_session(
    workspace: Path,
    state_dir: Path,
    *,
    client_name: str = "visual-studio-code",
    settings: dict[str, Any] | None = None,
    folders: list[Path] | None = None,
    on_client: Callable[[LanguageClient], None] | None = None,
    client_factory: Callable[[], LanguageClient] = make_test_lsp_client,
    capabilities: types.ClientCapabilities | None = None,
    fast: bool = True,
    notifications: tuple[str, ...] = ("mplp/status",),
) -> AsyncIterator[Session]:
    """``fast=False``: the editor sends only ``settings`` (not FAST_SETTINGS), so the
    workspace's own settings file can show through. ``notifications``: the server's own
    notifications the client asks for (the plugins ask for ``mplp/status``)."""
    client = client_factory()
    session = Session(client, workspace, state_dir)

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        session.registrations.extend(params.registrations)

    @client.feature("mplp/status")
    def status(params: Any) -> None:
        session.statuses.append(plain(params))

    if on_client is not None:
        on_client(client)
    await client.start_io(
        sys.executable,
        "-m",
        "mplp_lsp",
        "serve",
        "--state-dir",
        str(state_dir),
        "--log-level",
        "info",
        env=server_env(),
    )
    roots = folders or [workspace]
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities or editor_capabilities(client_name),
            process_id=os.getpid(),
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=r.as_uri(), name=r.name) for r in roots],
            initialization_options={
                "mplp": {**(FAST_SETTINGS if fast else {}), **(settings or {})},
                "notifications": list(notifications),
            },
        )
    )
    try:
        await wait_until_ready(session)
        yield session
    finally:
        await client.shutdown_session()
        await client.stop()


async def wait_until_ready(session: Session, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await session.status()).get("ready"):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("mplp-lsp did not become ready")
