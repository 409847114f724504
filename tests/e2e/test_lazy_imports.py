"""What an idle daemon does not load: the jsonschema oracle until some input is invalid,
GitPython until a git command is needed, orjson until an event is stored, aiohttp until the
HTTP API gets a connection; and what `mplp-lsp events` does not load before its first line.
Each case runs in a fresh interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.gitrepo import Repo

SERVER = Path(__file__).resolve().parents[2] / "server"


def run(code: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(SERVER)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_oracle_loads_at_the_first_invalid_input_and_explains_it() -> None:
    out = run(
        """
        import sys
        from mplp_lsp.protocol.kinds import Kind
        from mplp_lsp.protocol.validator import default_validator
        payload = {"file_path": "a.py", "change_type": "modified",
                   "timestamp": "2026-01-01T00:00:00Z"}
        assert default_validator().validate(Kind.FILE_UPDATE, payload).ok
        print("jsonschema" in sys.modules)
        result = default_validator().validate(Kind.FILE_UPDATE, {**payload, "change_type": "x"})
        print("jsonschema" in sys.modules, *(e.code for e in result.errors))
        """
    )
    assert out == ["False", "True", "enum"]


def test_gitpython_loads_at_the_first_git_command(tmp_path: Path) -> None:
    repo = Repo.create(tmp_path / "ws")
    repo.commit("one")
    out = run(
        """
        import sys
        from pathlib import Path
        from mplp_lsp.vcs.repo import GitRepo
        repo = GitRepo.open(Path(sys.argv[1]))
        print("git" in sys.modules, repo.info.worktree == Path(sys.argv[1]).resolve())
        print(len(repo.run("rev-parse", "HEAD").strip()), "git" in sys.modules)
        """,
        str(repo.path),
    )
    assert out == ["False", "True", "40", "True"]


def test_orjson_loads_when_the_first_event_is_stored(tmp_path: Path) -> None:
    out = run(
        """
        import sys
        from pathlib import Path
        import mplp_lsp.lsp.server, mplp_lsp.engine.workspace
        from mplp_lsp.store import EventLog, NewEvent, connect
        print("orjson" in sys.modules)
        log = EventLog(connect(Path(sys.argv[1])))
        stamp = "2026-03-02T08:00:00.000Z"
        log.append([NewEvent("id-1", "file_update", "key-1", stamp, {"event_id": "id-1"})])
        print("orjson" in sys.modules)
        """,
        str(tmp_path / "events.db"),
    )
    assert out == ["False", "True"]


def test_aiohttp_loads_when_the_api_gets_its_first_connection(tmp_path: Path) -> None:
    out = run(
        """
        import asyncio, sys
        from pathlib import Path
        from mplp_lsp.api.services import ApiServices
        from mplp_lsp.api.server import ApiServer
        from mplp_lsp.engine.statedir import StatePaths

        class NoRuns:  # the plan runs a stopping API cancels: none here
            async def close(self) -> None:
                pass

        async def main() -> None:
            services = ApiServices(None, None, None, None, NoRuns())
            server = ApiServer(services, StatePaths(Path(sys.argv[1])))
            await server.start()
            print("aiohttp" in sys.modules, server.token_file.exists())
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            host = f"127.0.0.1:{server.port}"
            writer.write(f"GET /health HTTP/1.1\\r\\nHost: {host}\\r\\n\\r\\n".encode())
            status = (await reader.readline()).split()[1].decode()
            print("aiohttp" in sys.modules, status)  # served, and refused without the token
            writer.close()
            await server.stop()
            print(server.token_file.exists())

        asyncio.run(main())
        """,
        str(tmp_path),
    )
    assert out == ["False", "True", "True", "401", "False"]


# What a command that only reads the store must not pay for before its first line: the
# event loop, the daemon's libraries, the settings of a validation library, the writer; and,
# with its state dir named, what only naming one needs (hashlib loads OpenSSL; platformdirs
# the user's folders) and what only a writer's dedup keys need (their module and its SQL
# functions); the event log's module (the recorded editor settings are one meta entry), the
# validator's results, the envelope builder and the state dir's lock; and shutil, with the
# zlib, bz2 and lzma it loads (argparse asks it for the terminal's width only for help).
_DAEMON_ONLY = (
    "hashlib",
    "platformdirs",
    "asyncio",
    "pydantic",
    "jsonschema",
    "jsonschema_rs",
    "aiohttp",
    "git",
    "pygls",
    "lsprotocol",
    "mplp_lsp.store.writer",
    "mplp_lsp.sanitize.redact",
    "mplp_lsp.store.events",
    "mplp_lsp.store.dedup",
    "mplp_lsp.protocol.result",
    "mplp_lsp.protocol.envelope",
    "fcntl",
    "shutil",
    "lzma",
    "bz2",
)


@pytest.mark.parametrize(
    "options", [[], ["--json"], ["--limit", "1"], ["--kind", "file_update"]], ids=" ".join
)
def test_events_prints_without_loading_what_only_a_daemon_uses(
    tmp_path: Path, options: list[str]
) -> None:
    from mplp_lsp.config.process import EDITOR_META_KEY, editor_record
    from mplp_lsp.store import EventLog, NewEvent, connect

    state = tmp_path / "state"
    state.mkdir()
    conn = connect(state / "events.db")
    stamp = "2026-03-02T08:00:00.000Z"
    log = EventLog(conn)
    log.append([NewEvent("id-1", "file_update", "key-1", stamp, {"event_id": "id-1"})])
    # As an editor's serve leaves it: the settings it was given, read back by the command.
    log.set_meta(EDITOR_META_KEY, editor_record({"log_level": "error"}))
    conn.close()
    out = run(
        f"""
        import logging, sys
        from mplp_lsp.cli import main
        main(["events", *sys.argv[3:], "--state-dir", sys.argv[1], "--workspace", sys.argv[2]])
        print("level:", logging.getLevelName(logging.getLogger().level))
        print("loaded:", *[name for name in {_DAEMON_ONLY!r} if name in sys.modules])
        """,
        str(state),
        str(tmp_path),
        *options,
    )
    assert out[0] == ('{"event_id":"id-1"}' if "--json" in options else "1")  # the event
    assert out[out.index("level:") + 1] == "ERROR"  # the recorded editor's logLevel
    assert out[out.index("loaded:") + 1 :] == []


def test_serve_answers_initialize_before_reading_settings_or_opening_a_store(
    tmp_path: Path,
) -> None:
    """Everything the answer to ``initialize`` does not need waits for ``initialized``: the
    settings (files, schema), the store, the validators, the engine."""
    import json

    argv = [sys.executable, "-X", "importtime", "-m", "mplp_lsp", "serve"]
    server = subprocess.Popen(
        [*argv, "--state-dir", str(tmp_path / "state")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # No answer kept from an earlier start: this start loads the server to answer.
        env={**os.environ, "PYTHONPATH": str(SERVER), "MPLP_LSP_CACHE_DIR": str(tmp_path / "c")},
    )
    assert server.stdin is not None and server.stdout is not None
    stdout = server.stdout
    params: dict[str, object] = {
        "processId": None,
        "rootUri": tmp_path.as_uri(),
        "capabilities": {},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    server.stdin.write(f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
    server.stdin.flush()
    lines = iter(lambda: stdout.readline().strip(), b"")
    headers = dict(line.split(b": ", 1) for line in lines)
    answer = json.loads(stdout.read(int(headers[b"Content-Length"])))
    server.kill()  # before initialized: nothing is loaded after the answer
    _, errors = server.communicate(timeout=30)
    assert "capabilities" in answer["result"]
    loaded = {line.split("|")[-1].strip() for line in errors.decode().splitlines()}
    later = {
        "mplp_lsp.config.settings",
        "mplp_lsp.config.resolve",
        "tomllib",
        "sqlite3",
        "mplp_lsp.store",
        "mplp_lsp.engine.workspace",
        "mplp_lsp.sources.debounce",
        "mplp_lsp.protocol.result",
        "hashlib",
        "platformdirs",
        "jsonschema_rs",
        "git",
        "aiohttp",
        "orjson",
        "pydantic",
    }
    assert "lsprotocol.types" in loaded and loaded & later == set()


def test_an_idle_daemon_holds_no_validator_until_activity_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    out = run(
        """
        import asyncio, sys
        from pathlib import Path
        from mplp_lsp.config.settings import Settings
        from mplp_lsp.sources.debounce import Change
        from mplp_lsp.engine.workspace import Workspace

        async def main() -> None:
            root = Path(sys.argv[1])
            settings = Settings(debounce_ms=50, max_wait_ms=100, drift_interval=0)
            ws = await Workspace.open(root, settings, state_dir=root.parent / "state")
            await asyncio.sleep(0.5)
            print("jsonschema_rs" in sys.modules, "yaml" in sys.modules)
            (root / "a.py").write_text("x = 1\\n")
            ws.observe(Change.CREATED, "a.py")
            await ws.settle()
            stored = (await ws.status()).events_by_kind.get("file_update", 0)
            print("jsonschema_rs" in sys.modules, "yaml" in sys.modules, stored)
            await ws.close()

        asyncio.run(main())
        """,
        str(root),
    )
    assert out == ["False", "False", "True", "True", "1"]


def test_a_kept_answer_to_initialize_is_sent_before_the_language_server_is_loaded(
    tmp_path: Path,
) -> None:
    """With the answer kept from an earlier start, ``serve`` answers before it imports pygls
    and lsprotocol: its answer comes before their import-time lines in one stream."""
    import json

    env = {**os.environ, "PYTHONPATH": str(SERVER), "MPLP_LSP_CACHE_DIR": str(tmp_path / "c")}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
    ).encode()
    streams = []
    for _ in range(2):  # the first start keeps its answer, the second sends it at once
        server = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "mplp_lsp", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
        )
        # exit ends the server: its stream is then whole
        exit_message = b'{"jsonrpc": "2.0", "method": "exit"}'
        data = b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        data += b"Content-Length: %d\r\n\r\n%s" % (len(exit_message), exit_message)
        streams.append(server.communicate(data, timeout=60)[0])
    (answered, loaded), (answered_early, loaded_later) = map(_answer_and_load, streams)
    assert 0 <= loaded < answered
    assert 0 <= answered_early < loaded_later


def _answer_and_load(stream: bytes) -> tuple[int, int]:
    """Where the answer to initialize and the line of lsprotocol.types's import are."""
    loaded = re.search(rb"\| +lsprotocol\.types\n", stream)
    return stream.find(b'"result"'), loaded.start() if loaded else -1
