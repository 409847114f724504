"""A workspace's own config file cannot set what runs a program, reads a file or sends data.

The same attack as test_settings_origin, through ``.mplp-lsp.toml`` or ``pyproject.toml``:
anyone who can write to the repository writes these files. One rule for every
workspace-level source: only the user's own sources can opt in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mplp_lsp.config import resolve
from mplp_lsp.config.settings import SENSITIVE_SETTINGS
from mplp_lsp.config.sources import flag_layer, user_file

HOSTILE = """
remoteUrl = "https://attacker.example"
remoteTokenFile = "~/.ssh/id_ed25519"
remoteAllowInsecureHttp = true
stateDir = "/tmp/elsewhere"
vslUrl = "memory://"
llmEndpointUrl = "https://attacker.example/v1"
llmModel = "m"
llmApiKeyFile = "/etc/shadow"
otlpEndpoint = "https://attacker.example:4318"
otlpTokenFile = "~/.ssh/id_ed25519"
otlpSendHostName = true
remotes = [{kind = "otlp", url = "https://attacker.example:4318"}]
allowWorkspaceSensitiveSettings = true
debounceMs = 100
[tools.pwn]
command = ["sh", "-c", "touch marker"]
"""
SERVER_SIDE = SENSITIVE_SETTINGS - {"interpreter", "serverPath"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


@pytest.fixture(params=[".mplp-lsp.toml", "pyproject.toml"])
def root(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    text = (
        HOSTILE
        if request.param == ".mplp-lsp.toml"
        else "[tool.mplp-lsp]" + HOSTILE.replace("[tools.pwn]", "[tool.mplp-lsp.tools.pwn]")
    )
    (folder / request.param).write_text(text)
    return folder


def test_sensitive_keys_are_ignored_with_a_warning_each(root: Path, env: dict[str, str]) -> None:
    resolved = resolve(root, env=env)
    settings = resolved.settings
    assert settings.remote_url is None and settings.remote_token_file is None
    assert settings.tools == () and settings.state_dir is None
    assert (settings.llm_endpoint_url, settings.llm_api_key_file, settings.vsl_url) == (
        None,
        None,
        None,
    )
    assert (settings.otlp_endpoint, settings.otlp_token_file, settings.remotes) == (None, None, ())
    assert settings.allow_workspace_sensitive_settings is False
    assert settings.debounce_ms == 100  # the rest of the file still applies
    ignored = {w.split(": ", 1)[1].split()[0] for w in resolved.warnings if "workspace's own" in w}
    assert ignored == SERVER_SIDE | {"allowWorkspaceSensitiveSettings"}
    assert all(w.startswith(str(root)) for w in resolved.warnings)


@pytest.mark.parametrize("where", ["user file", "env", "flag", "editor user level"])
def test_the_user_can_opt_in_from_any_user_level_source(
    root: Path, env: dict[str, str], where: str
) -> None:
    flags, editor = None, None
    if where == "user file":
        path = user_file(env)
        path.parent.mkdir(parents=True)
        path.write_text("allowWorkspaceSensitiveSettings = true\n")
    elif where == "env":
        env["MPLP_LSP_ALLOW_WORKSPACE_SENSITIVE_SETTINGS"] = "true"
    elif where == "flag":
        flags = flag_layer(["allowWorkspaceSensitiveSettings=true"], {})
    else:
        editor = [{"allowWorkspaceSensitiveSettings": True}]
    settings = resolve(root, editor=editor, flags=flags, env=env).settings
    assert settings.remote_url == "https://attacker.example"
    assert settings.tool("pwn") is not None


def test_a_higher_user_level_source_can_withdraw_the_opt_in(
    root: Path, env: dict[str, str]
) -> None:
    path = user_file(env)
    path.parent.mkdir(parents=True)
    path.write_text("allowWorkspaceSensitiveSettings = true\n")
    env["MPLP_LSP_ALLOW_WORKSPACE_SENSITIVE_SETTINGS"] = "false"
    assert resolve(root, env=env).settings.remote_url is None


def test_the_file_opt_in_reaches_editor_workspace_entries_too(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    path = user_file(env)
    path.parent.mkdir(parents=True)
    editor = [{"origin": "workspace", "remoteUrl": "https://team.example"}]
    assert resolve(tmp_path, editor=editor, env=env).settings.remote_url is None
    path.write_text("allowWorkspaceSensitiveSettings = true\n")
    assert resolve(tmp_path, editor=editor, env=env).settings.remote_url == "https://team.example"
