"""``mplp-lsp config --json`` as a real process: each source and each precedence step, with
real files, real variables and real flags; and every value's origin."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import mplp


@pytest.fixture
def xdg(tmp_path: Path) -> Path:
    return tmp_path / "xdg"


def config(root: Path, xdg: Path, *args: str, **env: str) -> tuple[dict[str, Any], str]:
    done = mplp(
        root, "config", "--json", "--workspace", str(root), *args, XDG_CONFIG_HOME=str(xdg), **env
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)["settings"], done.stderr


def user_file(xdg: Path, text: str) -> Path:
    path = xdg / "mplp-lsp" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults(workspace: Path, xdg: Path) -> None:
    settings, stderr = config(workspace, xdg)
    assert settings["debounceMs"] == {"value": 500, "origin": "default"}
    assert {entry["origin"] for entry in settings.values()} == {"default"}
    assert stderr == ""


def test_user_file_over_defaults(workspace: Path, xdg: Path) -> None:
    path = user_file(xdg, "debounceMs = 250\n")
    settings, _ = config(workspace, xdg)
    assert settings["debounceMs"] == {"value": 250, "origin": f"user file {path}"}


def test_workspace_file_over_user_file(workspace: Path, xdg: Path) -> None:
    user_file(xdg, "debounceMs = 250\ngitPollMs = 300\n")
    (workspace / ".mplp-lsp.toml").write_text('debounceMs = 100\nexclude = ["build/"]\n')
    settings, _ = config(workspace, xdg)
    origin = f"workspace file {workspace / '.mplp-lsp.toml'}"
    assert settings["debounceMs"] == {"value": 100, "origin": origin}
    assert settings["exclude"] == {"value": ["build/"], "origin": origin}
    assert settings["gitPollMs"]["value"] == 300


def test_pyproject_table(workspace: Path, xdg: Path) -> None:
    (workspace / "pyproject.toml").write_text("[tool.mplp-lsp]\ndebounceMs = 120\n")
    settings, _ = config(workspace, xdg)
    origin = f"workspace file {workspace / 'pyproject.toml'}"
    assert settings["debounceMs"] == {"value": 120, "origin": origin}


def test_recorded_editor_over_workspace_file(workspace: Path, xdg: Path, state_dir: Path) -> None:
    (workspace / ".mplp-lsp.toml").write_text("debounceMs = 100\ngitAuthorEmail = 'drop'\n")
    # A store, and what an editor's server recorded in it.
    made = mplp(
        workspace,
        "emit",
        "file",
        "--path",
        "a.txt",
        "--change",
        "created",
        "--state-dir",
        str(state_dir),
    )
    assert made.returncode == 0, made.stderr
    with sqlite3.connect(state_dir / "events.db") as conn:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('config.editor', ?)",
            (json.dumps({"gitAuthorEmail": "keep", "remoteUrl": "https://not.recorded"}),),
        )
    settings, _ = config(workspace, xdg, "--state-dir", str(state_dir))
    assert settings["gitAuthorEmail"] == {
        "value": "keep",
        "origin": "editor (as the store's owner last received it)",
    }
    assert settings["debounceMs"]["value"] == 100
    assert settings["remoteUrl"] == {"value": None, "origin": "default"}  # never taken from there
    settings, _ = config(
        workspace, xdg, "--state-dir", str(state_dir), MPLP_LSP_GIT_AUTHOR_EMAIL="hash"
    )
    assert settings["gitAuthorEmail"] == {
        "value": "hash",
        "origin": "env MPLP_LSP_GIT_AUTHOR_EMAIL",
    }


def test_env_over_workspace_file(workspace: Path, xdg: Path) -> None:
    (workspace / ".mplp-lsp.toml").write_text("debounceMs = 100\n")
    settings, _ = config(workspace, xdg, MPLP_LSP_DEBOUNCE_MS="42", MPLP_LSP_EXCLUDE='["dist/"]')
    assert settings["debounceMs"] == {"value": 42, "origin": "env MPLP_LSP_DEBOUNCE_MS"}
    assert settings["exclude"] == {"value": ["dist/"], "origin": "env MPLP_LSP_EXCLUDE"}


def test_flags_over_env(workspace: Path, xdg: Path, tmp_path: Path) -> None:
    flagged = tmp_path / "flagged"
    settings, _ = config(
        workspace,
        xdg,
        "--set",
        "debounceMs=7",
        "--state-dir",
        str(flagged),
        MPLP_LSP_DEBOUNCE_MS="42",
        MPLP_LSP_STATE_DIR=str(tmp_path / "env-state"),
    )
    assert settings["debounceMs"] == {"value": 7, "origin": "flag --set debounceMs"}
    assert settings["stateDir"] == {"value": str(flagged), "origin": "flag --state-dir"}


def test_bad_values_are_warnings_naming_file_key_and_reason(workspace: Path, xdg: Path) -> None:
    path = workspace / ".mplp-lsp.toml"
    path.write_text('debounceMs = "soon"\nmaxWaitMs = 900\nremoteUrl = "https://evil.example"\n')
    settings, stderr = config(workspace, xdg, MPLP_LSP_GIT_POLL_MS="often")
    assert settings["maxWaitMs"]["value"] == 900
    assert settings["debounceMs"]["origin"] == "default"
    assert settings["remoteUrl"]["value"] is None
    assert f"{path}: debounceMs: input should be a valid integer" in stderr
    assert f"{path}: remoteUrl is ignored in a workspace's own settings" in stderr
    assert "MPLP_LSP_GIT_POLL_MS: gitPollMs wants JSON" in stderr


def test_text_output_shows_each_origin(workspace: Path, xdg: Path) -> None:
    path = user_file(xdg, "debounceMs = 250\n")
    done = mplp(workspace, "config", "--workspace", str(workspace), XDG_CONFIG_HOME=str(xdg))
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if "debounceMs=" in line)
    assert line.split() == ["user", "file", str(path), "debounceMs=250"]
