"""What both collector commands share (``collector serve`` on SQLite, cli/collector.py, and on
PostgreSQL, cli/collector_team.py): the token given, the refusal line, serving until a signal."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

TOKEN_ENV: Final = "MPLP_LSP_COLLECTOR_TOKEN"  # noqa: S105 (a variable name)

Ready = Callable[[str, int], None]


def serve_until_stopped(serve: Callable[[Ready], Awaitable[None]], where: str) -> None:
    """Run a collector until SIGINT or SIGTERM; say where it listens once it does."""

    def ready(host: str, port: int) -> None:
        print(f"collector listening on http://{host}:{port} ({where})", file=sys.stderr)
        sys.stderr.flush()

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        await serve(ready)

    with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
        asyncio.run(main())


def fail(message: str) -> int:
    print(f"mplp-lsp collector: {message}", file=sys.stderr)
    return 1


def given_token(args: argparse.Namespace) -> str | None:
    """The token from the environment or --token-file, if either is given."""
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV].strip()
    if args.token_file:
        return Path(args.token_file).expanduser().read_text(encoding="utf-8").strip()
    return None
