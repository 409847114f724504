"""``mplp-lsp validate`` and the top-level CLI, run as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mplp_lsp import __version__
from tests.conftest import sample


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write(tmp_path: Path, name: str, value: object) -> str:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"mplp-lsp {__version__}"


def test_no_command_prints_usage_and_exits_2() -> None:
    done = run()
    assert done.returncode == 2
    assert "validate" in done.stderr


def test_help_mentions_exit_status() -> None:
    done = run("validate", "--help")
    assert done.returncode == 0
    assert "Exit status" in done.stdout


def test_all_valid_exits_0(tmp_path: Path) -> None:
    files = [write(tmp_path, f"{k}.json", sample(k)) for k in ("tool", "file_update", "git", "ci")]
    done = run("validate", *files)
    assert done.returncode == 0, done.stdout
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["ok"] * 4


def test_one_invalid_exits_1_and_names_path_and_code(tmp_path: Path) -> None:
    bad = sample("git") | {"event_kind": "rebase"}
    done = run(
        "validate", write(tmp_path, "good.json", sample("ci")), write(tmp_path, "bad.json", bad)
    )
    assert done.returncode == 1
    assert "invalid  " in done.stdout
    assert "event_kind: enum:" in done.stdout


def test_io_error_exits_2_but_still_checks_the_rest(tmp_path: Path) -> None:
    done = run(
        "validate", str(tmp_path / "missing.json"), write(tmp_path, "bad.json", {"tool_id": 1})
    )
    assert done.returncode == 2
    assert "cannot read" in done.stderr and "missing.json" in done.stderr
    assert "invalid" in done.stdout


def test_json_output_one_line_per_input(tmp_path: Path) -> None:
    done = run(
        "validate",
        "--json",
        write(tmp_path, "a.json", sample("tool")),
        write(tmp_path, "b.json", "{oops"),
    )
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(line["kind"], line["ok"]) for line in lines] == [("tool", True), (None, False)]
    assert lines[1]["errors"][0]["code"] == "invalid_json"
    assert set(lines[0]) == {"input", "kind", "ok", "errors"}


def test_stdin_and_json_lines() -> None:
    text = "\n".join([json.dumps(sample("tool")), json.dumps(sample("ci") | {"status": "ok"}), ""])
    done = run("validate", "--json", "-", stdin=text)
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(line["input"], line["ok"]) for line in lines] == [("-:1", True), ("-:2", False)]


def test_explicit_kind_overrides_detection(tmp_path: Path) -> None:
    done = run("validate", "--json", "--kind", "tool", write(tmp_path, "git.json", sample("git")))
    assert done.returncode == 1
    codes = {e["code"] for e in json.loads(done.stdout)["errors"]}
    assert {"required", "extra_forbidden"} <= codes


def test_unrecognisable_input_is_unknown_kind(tmp_path: Path) -> None:
    done = run("validate", "--json", write(tmp_path, "x.json", {"hello": "world"}))
    assert done.returncode == 1
    assert json.loads(done.stdout)["errors"][0]["code"] == "unknown_kind"


def test_bad_kind_is_a_usage_error(tmp_path: Path) -> None:
    assert run("validate", "--kind", "nope", write(tmp_path, "x.json", {})).returncode == 2


def test_reference_examples(reference: Path, tmp_path: Path) -> None:
    shipped = sorted(str(p) for p in (reference / "examples" / "integration").glob("*.json"))
    done = run("validate", "--json", *shipped)
    assert done.returncode == 1
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["errors"] for r in results] == [
        [
            {
                "path": "$comment",
                "code": "extra_forbidden",
                "message": "'$comment' is not allowed here",
            }
        ]
    ] * 4
    stripped = []
    for path in shipped:
        data = json.loads(Path(path).read_text())
        data.pop("$comment")
        stripped.append(write(tmp_path, Path(path).name, data))
    done = run("validate", *stripped)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize(
    "kind", ["envelope", "pipeline_stage", "graph_update", "runtime_execution"]
)
def test_kind_choices_exist(kind: str, tmp_path: Path) -> None:
    done = run("validate", "--kind", kind, write(tmp_path, "x.json", {}))
    assert done.returncode == 1
