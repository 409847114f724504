"""Run any command as a reported tool invocation: ``running``, then how it ended.

The child's output goes through unchanged (bytes, as they come); the wrapper keeps only a
bounded tail for the summary. SIGINT, SIGTERM and SIGHUP are passed on to the child, and an
invocation that ends by one of them is ``cancelled``. A signal the wrapper was started with
ignored stays ignored, as the shell intends for background jobs (``cmd &`` in a script ignores
SIGINT); the child inherits the same disposition, so forwarding it would only record a
``cancelled`` run that goes on. The exit status is the child's (128+N
for a child killed by signal N, as shells report it). Reporting never changes what the
wrapped command does: a report that fails is a warning on stderr, nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.sanitize.redact import redact, redact_args

Report = Callable[[dict[str, Any]], Awaitable[None]]

TOOL_KINDS = ("linter", "formatter", "test_runner", "generator", "other")
COMMAND_NOT_FOUND = 127
SUMMARY_LINES = 5
SUMMARY_CHARS = 500
_TAIL_BYTES = 16 * 1024
_CHUNK = 64 * 1024
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_VERSION_TIMEOUT = 2.0
_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?(?:[-+.]?[0-9A-Za-z]+)*)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

# Asked for their version with --version: tools known to answer it without side effects.
# Anything else is named without a version rather than run twice (`./deploy.sh --version`
# might deploy).
VERSION_PROBED = frozenset(
    {
        "bandit", "biome", "black", "cargo", "clang-format", "clang-tidy", "eslint",
        "flake8", "go", "golangci-lint", "isort", "jest", "mocha", "mypy", "node", "npm",
        "nox", "prettier", "pylint", "pyright", "pytest", "python", "python3", "rubocop",
        "ruff", "rustfmt", "shellcheck", "tox", "tsc", "uv", "vitest", "yamllint",
    }
)  # fmt: skip


# The kind of a well-known tool (docs/events-tool-ci.md keeps the same table): by its name,
# or by its name and its first word that is not an option (`ruff format` formats).
KNOWN_KINDS: Final[Mapping[str, str]] = {
    **dict.fromkeys(
        ("eslint", "flake8", "pylint", "mypy", "pyright", "bandit", "shellcheck", "yamllint",
         "golangci-lint", "rubocop", "clang-tidy", "tsc", "stylelint", "hadolint", "markdownlint",
         "biome", "ruff", "oxlint", "vale"),
        "linter",
    ),
    **dict.fromkeys(
        ("black", "isort", "prettier", "rustfmt", "clang-format", "gofmt", "shfmt", "autopep8",
         "yapf", "dprint", "taplo"),
        "formatter",
    ),
    **dict.fromkeys(
        ("pytest", "jest", "vitest", "mocha", "tox", "nox", "ava", "karma", "phpunit", "rspec",
         "ctest", "playwright"),
        "test_runner",
    ),
    **dict.fromkeys(
        ("protoc", "buf", "openapi-generator", "openapi-generator-cli", "datamodel-codegen",
         "sqlc", "swagger-codegen", "graphql-codegen", "flatc", "thrift"),
        "generator",
    ),
}  # fmt: skip
SUBCOMMAND_KINDS: Final[Mapping[tuple[str, str], str]] = {
    ("ruff", "check"): "linter",
    ("ruff", "format"): "formatter",
    ("biome", "format"): "formatter",
    ("biome", "lint"): "linter",
    ("cargo", "test"): "test_runner",
    ("cargo", "nextest"): "test_runner",
    ("cargo", "clippy"): "linter",
    ("cargo", "fmt"): "formatter",
    ("go", "test"): "test_runner",
    ("go", "vet"): "linter",
    ("go", "generate"): "generator",
    ("npm", "test"): "test_runner",
    ("pnpm", "test"): "test_runner",
    ("yarn", "test"): "test_runner",
    ("dotnet", "test"): "test_runner",
    ("dotnet", "format"): "formatter",
    ("buf", "lint"): "linter",
    ("buf", "format"): "formatter",
    ("buf", "generate"): "generator",
    ("mvn", "test"): "test_runner",
    ("gradle", "test"): "test_runner",
}
# Programs that run another one named by their next word (`npx eslint .`, `uv run pytest`).
_LAUNCHERS: Final[Mapping[str, tuple[str, ...]]] = {
    "npx": (),
    "bunx": (),
    "uvx": (),
    "pnpx": (),
    "pnpm": ("exec", "dlx"),
    "yarn": ("run", "exec", "dlx"),
    "uv": ("run",),
    "poetry": ("run",),
    "pipx": ("run",),
    "pdm": ("run",),
    "hatch": ("run",),
}


def tool_kind_for(argv: Sequence[str]) -> str:
    """What sort of tool ``argv`` runs, for the well-known ones; else ``other``."""
    words = _launched(list(argv))
    if not words:
        return "other"
    name = Path(words[0]).name.removesuffix(".exe")
    first = next((word for word in words[1:] if not word.startswith("-")), "")
    return SUBCOMMAND_KINDS.get((name, first)) or KNOWN_KINDS.get(name, "other")


def _launched(words: list[str]) -> list[str]:
    """The program ``words`` runs in the end: past ``python -m``, ``npx`` and the like."""
    for _ in range(3):  # `uv run python -m pytest`
        if len(words) < 2:
            return words
        name = Path(words[0]).name
        if name.startswith("python") and words[1] == "-m":
            words = words[2:]
        elif name in _LAUNCHERS and not _LAUNCHERS[name]:
            words = _past_options(words[1:])
        elif name in _LAUNCHERS and words[1] in _LAUNCHERS[name]:
            words = _past_options(words[2:])
        else:
            return words
    return words


def _past_options(words: list[str]) -> list[str]:
    for index, word in enumerate(words):
        if not word.startswith("-"):
            return words[index:]
    return []


@dataclass
class ToolRun:
    argv: Sequence[str]
    # None: the kind of a well-known tool (tool_kind_for), else "other".
    tool_kind: str | None = None
    tool_id: str | None = None
    cwd: Path = field(default_factory=Path.cwd)
    workspace: Path | None = None


@dataclass
class _Outcome:
    exit_status: int
    status: str
    summary: str


def tool_name(argv: Sequence[str]) -> str:
    """``ruff`` for ``ruff check``, ``ruff`` for ``python -m ruff``."""
    name = Path(argv[0]).name
    if name.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    return name


async def tool_id_for(argv: Sequence[str], cache: MutableMapping[str, str] | None = None) -> str:
    """name-version when the tool is known to tell its version, else the name alone."""
    name = tool_name(argv)
    if name not in VERSION_PROBED:
        return name
    probe = [*argv[:3], "--version"] if name != Path(argv[0]).name else [argv[0], "--version"]
    executable = shutil.which(probe[0])
    if executable is None:
        return name
    key = _cache_key(executable, probe)
    if cache is not None and key in cache:
        return cache[key]
    version = await _ask_version([executable, *probe[1:]])
    found = f"{name}-{version}" if version else name
    if cache is not None:
        cache[key] = found
    return found


def _cache_key(executable: str, probe: Sequence[str]) -> str:
    # A tool upgraded in place changes its mtime, which retires the cached version.
    real = Path(executable).resolve()
    try:
        mtime = real.stat().st_mtime_ns
    except OSError:
        mtime = 0
    return f"{real}:{mtime}:{' '.join(probe[1:])}"


async def _ask_version(command: Sequence[str]) -> str | None:
    try:
        child = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError:
        return None
    try:
        output, _ = await asyncio.wait_for(child.communicate(), _VERSION_TIMEOUT)
    except TimeoutError:
        child.kill()
        await child.wait()
        return None
    match = _VERSION.search(output.decode("utf-8", "replace"))
    return match.group(1) if match else None


def summarise(tail: bytes) -> str:
    """The last few non-empty lines of output, without terminal colours, redacted."""
    text = _ANSI.sub("", tail.decode("utf-8", "replace")).replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n") if line.strip()]
    summary = "\n".join(lines[-SUMMARY_LINES:])
    if len(summary) > SUMMARY_CHARS:
        summary = "…" + summary[-(SUMMARY_CHARS - 1) :]
    return redact(summary)


def workspace_relative(cwd: Path, workspace: Path | None) -> str | None:
    if workspace is None:
        return None
    try:
        relative = cwd.resolve().relative_to(workspace.resolve())
    except ValueError:
        return None  # outside the workspace: not ours to name
    return relative.as_posix() or "."


class _Tail:
    """The last bytes written to stdout and stderr, interleaved as they came."""

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def add(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        while self._size - len(self._chunks[0]) >= _TAIL_BYTES:
            self._size -= len(self._chunks.popleft())

    def value(self) -> bytes:
        return b"".join(self._chunks)[-_TAIL_BYTES:]


async def _relay(stream: asyncio.StreamReader, fd: int, tail: _Tail) -> None:
    while chunk := await stream.read(_CHUNK):
        tail.add(chunk)
        view = memoryview(chunk)
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                await asyncio.sleep(0.001)
                continue
            except OSError:
                return  # our own stdout went away (closed pipe): keep draining the child
            view = view[written:]


async def run_tool(
    run: ToolRun,
    report: Report,
    *,
    version_cache: MutableMapping[str, str] | None = None,
    stdout_fd: int = 1,
    stderr_fd: int = 2,
    forward_signals: bool = True,
) -> int:
    """Run ``run.argv`` and report it; returns the exit status to exit with.

    ``forward_signals`` is for a process that is only the wrapper (``mplp-lsp run``); a daemon
    keeps its own signal handling. Cancelling this coroutine terminates the child, reports
    ``cancelled`` and then lets the cancellation through.
    """
    base: dict[str, Any] = {
        "tool_id": run.tool_id,
        "tool_kind": run.tool_kind or tool_kind_for(run.argv),
        "invocation_id": new_id(),
        "args": redact_args(list(run.argv[1:]), program=run.argv[0]),
    }
    if (where := workspace_relative(run.cwd, run.workspace)) is not None:
        base["working_directory"] = where
    started_at = utc_timestamp()
    try:
        child = await asyncio.create_subprocess_exec(
            *run.argv,
            cwd=run.cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        print(f"mplp-lsp run: cannot run {run.argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        base["tool_id"] = base["tool_id"] or tool_name(run.argv)
        failed = {
            **base,
            "status": "failed",
            "started_at": started_at,
            "completed_at": utc_timestamp(),
            "exit_code": COMMAND_NOT_FOUND,
            "output_summary": f"cannot run {Path(run.argv[0]).name}",
        }
        await _safely(report, failed)
        return COMMAND_NOT_FOUND
    received: list[int] = []
    restore = _forward_signals(child, received) if forward_signals else (lambda: None)
    tail = _Tail()
    cancelled: asyncio.CancelledError | None = None
    try:
        if base["tool_id"] is None:
            base["tool_id"] = await _tool_id_or_name(run.argv, version_cache)
        running = asyncio.create_task(
            _safely(report, {**base, "status": "running", "started_at": started_at})
        )
        assert child.stdout is not None and child.stderr is not None
        relays = asyncio.gather(
            _relay(child.stdout, stdout_fd, tail), _relay(child.stderr, stderr_fd, tail)
        )
        try:
            await asyncio.shield(relays)
        except asyncio.CancelledError as error:
            cancelled = error
            received.append(signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
            await relays
        returncode = await child.wait()
        await running
    finally:
        restore()
    outcome = _outcome(returncode, received, tail.value())
    await _safely(
        report,
        {
            **base,
            "status": outcome.status,
            "started_at": started_at,
            "completed_at": utc_timestamp(),
            "exit_code": outcome.exit_status,
            "output_summary": outcome.summary,
        },
    )
    if cancelled is not None:
        raise cancelled
    return outcome.exit_status


async def _tool_id_or_name(argv: Sequence[str], cache: MutableMapping[str, str] | None) -> str:
    try:
        return await tool_id_for(argv, cache)
    except Exception:  # a version probe must never stop the run
        return tool_name(argv)


def _outcome(returncode: int, received: Sequence[int], tail: bytes) -> _Outcome:
    killed_by = -returncode if returncode < 0 else None
    exit_status = 128 + killed_by if killed_by is not None else returncode
    if received or killed_by in _FORWARDED:
        status = "cancelled"
    elif exit_status != 0:
        status = "failed"
    else:
        status = "succeeded"
    return _Outcome(exit_status, status, summarise(tail))


def _forward_signals(child: asyncio.subprocess.Process, received: list[int]) -> Callable[[], None]:
    loop = asyncio.get_running_loop()

    def forward(signum: int) -> None:
        received.append(signum)
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    handled = [signum for signum in _FORWARDED if signal.getsignal(signum) != signal.SIG_IGN]
    for signum in handled:
        loop.add_signal_handler(signum, forward, signum)

    def restore() -> None:
        for signum in handled:
            loop.remove_signal_handler(signum)

    return restore


async def _safely(report: Report, payload: dict[str, Any]) -> None:
    try:
        await report(payload)
    except Exception as exc:  # reporting trouble must not fail the wrapped command
        status = payload["status"]
        print(f"mplp-lsp run: could not record the {status} event: {exc}", file=sys.stderr)
