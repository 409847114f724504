"""A bare JSON-RPC-over-stdio client for benchmarks: no LSP library between us and the server."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


class RawClient:
    def __init__(self) -> None:
        self.process: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.notifications: list[tuple[str, Any]] = []

    async def start(self, *cmd: str, env: dict[str, str] | None = None) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            limit=2**26,
        )
        self._reader = asyncio.create_task(self._read())

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process is not None and self.process.stdin is not None
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def notify(self, method: str, params: Any) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any = None) -> Any:
        ident = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        self._write({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert self.process is not None and self.process.stdin is not None
        await self.process.stdin.drain()
        return await future

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        while True:
            try:
                header = await stdout.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                # The server ended (a test may end it without shutdown): no error is left
                # in the task (nobody would retrieve it), and a request still waiting fails.
                self._ended()
                return
            length = int(header.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            message = json.loads(await stdout.readexactly(length))
            if "method" in message and "id" in message:  # a request from the server
                reply: list[dict[str, Any]] | None = (
                    [{}] * len(message["params"]["items"])
                    if message["method"] == "workspace/configuration"
                    else None
                )
                self._write({"jsonrpc": "2.0", "id": message["id"], "result": reply})
            elif "method" in message:
                self.notifications.append((message["method"], message.get("params")))
            else:
                future = self._pending.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message.get("result"))

    def _ended(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the server ended"))
        self._pending.clear()

    async def initialize(
        self, root_uri: str | None, options: Any = None, capabilities: Any = None
    ) -> Any:
        result = await self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": root_uri,
                "capabilities": capabilities or {},
                "initializationOptions": options,
                "workspaceFolders": [{"uri": root_uri, "name": "bench"}] if root_uri else None,
            },
        )
        self.notify("initialized", {})
        return result

    async def stop(self) -> None:
        if self.process is None:
            return
        try:
            await asyncio.wait_for(self.request("shutdown"), 10)
            self.notify("exit", None)
            await asyncio.wait_for(self.process.wait(), 10)
        except (TimeoutError, ConnectionError):
            self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            self._reader.cancel()

    def cpu_ms(self) -> float:
        """The CPU time the server has used so far, user and system (Linux /proc; ticks of
        10 ms): on a shared machine it follows the load far less than the elapsed time."""
        assert self.process is not None
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        assert self.process is not None
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")


def minimal_cmd() -> list[str]:
    """The peer server: the smallest useful pygls server (minimal_server.py)."""
    return [sys.executable, str(Path(__file__).with_name("minimal_server.py"))]


def mplp_cmd(state_dir: Path) -> list[str]:
    """The language server as an editor starts it, recording into ``state_dir``."""
    return [sys.executable, "-m", "mplp_lsp", "serve", "--state-dir", str(state_dir)]


async def started(
    cmd: list[str], root: Path, options: object = None, caps: object = None
) -> tuple[RawClient, float]:
    """A server started and initialized on ``root``, and the seconds that took."""
    client = RawClient()
    begin = time.perf_counter()
    await client.start(*cmd, env={**os.environ})
    await client.initialize(root.as_uri(), options, caps)
    return client, time.perf_counter() - begin


async def wait_ready(client: RawClient) -> None:
    while not (await client.request("mplp/status"))["ready"]:
        await asyncio.sleep(0.02)


def save(client: RawClient, uri: str) -> None:
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
