"""The resolved configuration: each source, each precedence step, bad values per key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mplp_lsp.config import resolve
from mplp_lsp.config.sources import RESET, flag_layer, user_file

Env = dict[str, str]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def write_user(env: Env, text: str) -> Path:
    path = user_file(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_nothing_set_is_the_defaults_from_default(root: Path, env: Env) -> None:
    resolved = resolve(root, env=env)
    assert resolved.settings.debounce_ms == 500
    assert set(resolved.origins.values()) == {"default"}
    assert resolved.warnings == ()


def test_the_user_file_is_under_xdg_config_home_else_dot_config(env: Env) -> None:
    assert user_file(env) == Path(env["XDG_CONFIG_HOME"]) / "mplp-lsp" / "config.toml"
    relative = {"XDG_CONFIG_HOME": "relative/dir"}
    assert user_file(relative) == Path.home() / ".config" / "mplp-lsp" / "config.toml"


def test_user_file(root: Path, env: Env) -> None:
    path = write_user(env, "debounceMs = 250\n")
    resolved = resolve(root, env=env)
    assert resolved.settings.debounce_ms == 250
    assert resolved.origin("debounceMs") == f"user file {path}"


def test_workspace_file_over_user_file(root: Path, env: Env) -> None:
    write_user(env, "debounceMs = 250\nmaxWaitMs = 900\n")
    (root / ".mplp-lsp.toml").write_text('debounceMs = 100\nexclude = ["build/"]\n')
    resolved = resolve(root, env=env)
    assert (resolved.settings.debounce_ms, resolved.settings.max_wait_ms) == (100, 900)
    assert resolved.settings.exclude == ("build/",)
    assert resolved.origin("debounceMs") == f"workspace file {root / '.mplp-lsp.toml'}"
    assert resolved.origin("maxWaitMs").startswith("user file ")


def test_pyproject_table_is_a_workspace_file(root: Path, env: Env) -> None:
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.mplp-lsp]\ndebounceMs = 120\n[tool.other]\ndebounceMs = 1\n'
    )
    resolved = resolve(root, env=env)
    assert resolved.settings.debounce_ms == 120
    assert resolved.origin("debounceMs") == f"workspace file {root / 'pyproject.toml'}"


def test_pyproject_without_the_table_is_not_a_source(root: Path, env: Env) -> None:
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert resolve(root, env=env).warnings == ()


def test_dot_file_wins_over_pyproject_whole_and_says_so(root: Path, env: Env) -> None:
    (root / "pyproject.toml").write_text("[tool.mplp-lsp]\ndebounceMs = 120\nmaxWaitMs = 700\n")
    (root / ".mplp-lsp.toml").write_text("debounceMs = 100\n")
    resolved = resolve(root, env=env)
    assert (resolved.settings.debounce_ms, resolved.settings.max_wait_ms) == (100, 2000)
    assert any("[tool.mplp-lsp] is ignored" in w for w in resolved.warnings)


def test_editor_over_workspace_file(root: Path, env: Env) -> None:
    (root / ".mplp-lsp.toml").write_text("debounceMs = 100\ndriftInterval = 5\n")
    resolved = resolve(root, editor={"debounceMs": 300}, env=env)
    assert (resolved.settings.debounce_ms, resolved.settings.drift_interval) == (300, 5)
    assert resolved.origin("debounceMs") == "editor"
    assert resolved.editor == {"debounce_ms": 300}


def test_env_over_editor(root: Path, env: Env) -> None:
    env["MPLP_LSP_DEBOUNCE_MS"] = "42"
    resolved = resolve(root, editor={"debounceMs": 300}, env=env)
    assert resolved.settings.debounce_ms == 42
    assert resolved.origin("debounceMs") == "env MPLP_LSP_DEBOUNCE_MS"


def test_flags_over_env(root: Path, env: Env) -> None:
    env |= {"MPLP_LSP_DEBOUNCE_MS": "42", "MPLP_LSP_STATE_DIR": "/from/env"}
    flags = flag_layer(["debounceMs=7"], {"state_dir": ("--state-dir", "/from/flag")})
    resolved = resolve(root, flags=flags, env=env)
    assert (resolved.settings.debounce_ms, resolved.settings.state_dir) == (7, "/from/flag")
    assert resolved.origin("debounceMs") == "flag --set debounceMs"
    assert resolved.origin("stateDir") == "flag --state-dir"


@pytest.mark.parametrize(
    ("variable", "text", "name", "value"),
    [
        ("MPLP_LSP_EXCLUDE", '["build/", "*.log"]', "exclude", ("build/", "*.log")),
        ("MPLP_LSP_SEND_WORKSPACE_ROOT", "yes", "send_workspace_root", True),
        ("MPLP_LSP_API_ENABLED", "0", "api_enabled", False),
        ("MPLP_LSP_LLM_MODEL", "123", "llm_model", "123"),
        ("MPLP_LSP_REMOTE_URL", "https://r.example", "remote_url", "https://r.example"),
        ("MPLP_LSP_STATE_DIR", "~/s", "state_dir", "~/s"),
    ],
)
def test_env_values_by_type(
    root: Path, env: Env, variable: str, text: str, name: str, value: object
) -> None:
    env[variable] = text
    assert getattr(resolve(root, env=env).settings, name) == value


def test_bad_values_cost_only_their_key_and_name_file_key_reason(root: Path, env: Env) -> None:
    path = root / ".mplp-lsp.toml"
    path.write_text('debounceMs = "fast"\nmaxWaitMs = 900\nnoSuchKey = 1\nexclude = [1]\n')
    write_user(env, "debounceMs = 250\n")
    env["MPLP_LSP_GIT_POLL_MS"] = "soon"
    resolved = resolve(root, env=env)
    assert resolved.settings.debounce_ms == 250  # the next source down, not the default
    assert resolved.settings.max_wait_ms == 900
    text = "\n".join(resolved.warnings)
    assert f"{path}: debounceMs: input should be a valid integer" in text
    assert f"{path}: unknown setting 'noSuchKey' ignored" in text
    assert f"{path}: exclude: item 0: input should be a valid string" in text
    assert "MPLP_LSP_GIT_POLL_MS: gitPollMs wants JSON here" in text


@pytest.mark.parametrize("text", ["debounceMs = \n", "\xff\xfe", "[tool\n"])
def test_an_unreadable_file_is_one_warning(root: Path, env: Env, text: str) -> None:
    (root / ".mplp-lsp.toml").write_bytes(text.encode("latin-1"))
    resolved = resolve(root, env=env)
    assert resolved.settings.debounce_ms == 500
    assert len(resolved.warnings) == 1
    assert str(root / ".mplp-lsp.toml") in resolved.warnings[0]


def test_a_bad_editor_value_falls_back_to_the_file(root: Path, env: Env) -> None:
    (root / ".mplp-lsp.toml").write_text("debounceMs = 100\n")
    resolved = resolve(root, editor={"debounceMs": True}, env=env)
    assert resolved.settings.debounce_ms == 100
    assert resolved.warnings == (
        "editor: debounceMs: input should be a valid integer (got true); ignored",
    )


def test_set_flag_problems_are_errors_naming_the_assignment(root: Path, env: Env) -> None:
    flags = flag_layer(["debounceMs", "debounceMz=1", "debounceMs=-1", "apiEnabled=maybe"], {})
    assert flags.values == {}
    assert flags.errors == [
        "--set debounceMs: not KEY=VALUE (KEY= resets KEY)",
        "--set debounceMz=1: no setting is named 'debounceMz' (did you mean debounceMs?)",
        "--set apiEnabled=maybe: apiEnabled wants true or false, not 'maybe'",
        "--set debounceMs: input should be greater than or equal to 0 (got -1)",
    ]


def test_set_key_empty_puts_the_setting_back_to_its_default(root: Path, env: Env) -> None:
    (root / ".mplp-lsp.toml").write_text("debounceMs = 100\n")
    env = {**env, "MPLP_LSP_REMOTE_URL": "https://r.example"}
    flags = flag_layer(["debounceMs="], {"remote_url": ("--no-remote", RESET)})
    resolved = resolve(root, flags=flags, env=env)
    assert (resolved.settings.debounce_ms, resolved.settings.remote_url) == (500, None)
    assert resolved.origin("debounceMs") == "flag --set debounceMs= (the default)"
    assert resolved.origin("remoteUrl") == "flag --no-remote"


def test_snake_case_keys_and_tool_tables_in_files(root: Path, env: Env) -> None:
    write_user(
        env, 'debounce_ms = 90\n[tools.lint]\ncommand = ["ruff", "check"]\nkind = "linter"\n'
    )
    resolved = resolve(root, env=env)
    assert resolved.settings.debounce_ms == 90
    tool = resolved.settings.tool("lint")
    assert tool is not None and tool.command == ("ruff", "check")
