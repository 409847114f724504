"""The tests' bare JSON-RPC client (bench/benchlib/jsonrpc_client.py) when its server ends
without a shutdown, as the tests of signals and of end of input end it."""

from __future__ import annotations

import asyncio
import sys

import pytest

from benchlib.jsonrpc_client import RawClient


async def test_a_server_that_ends_leaves_no_error_in_the_reader_and_fails_a_waiting_request() -> (
    None
):
    client = RawClient()
    # a "server" that reads one message's worth of input and ends without answering
    await client.start(sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)")
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(client.request("mplp/status"), 10)
    reader = client._reader
    assert reader is not None
    await asyncio.wait_for(reader, 10)
    # An error left in the task would be logged, traceback and all, whenever the GC frees
    # it: inside an ast.parse, CPython 3.11.7 then fails that parse with a SystemError.
    assert reader.exception() is None
    assert client.process is not None
    await client.process.wait()
