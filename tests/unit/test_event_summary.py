"""The one-line summary of an envelope (events, watch, the dashboard's bucket list)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.protocol.summary import summary

COMMIT = "8fcb4b5191e789effbf544767cfed3b838b4ce8e"


def _graph(kind: str, **payload: Any) -> dict[str, Any]:
    return {
        "event_family": "graph_update",
        "event_type": "x_changed",
        "update_kind": kind,
        "payload": payload,
    }


def test_a_bulk_update_says_how_many_nodes_of_which_type_and_why() -> None:
    envelope = _graph(
        "bulk", node_type="file", cause="baseline", changes={"node_add": 2130, "node_delete": 3}
    )
    assert summary(envelope) == "bulk        2,133 file nodes (baseline)"


def test_a_node_update_names_its_type_and_node_and_shortens_commit_ids() -> None:
    assert (
        summary(_graph("node_add", node_type="file", node_id="src/app.py"))
        == "node_add    file src/app.py"
    )
    assert (
        summary(_graph("node_add", node_type="commit", node_id=COMMIT))
        == f"node_add    commit {COMMIT[:12]}"
    )


def test_missing_fields_are_left_out_not_shown_as_placeholders() -> None:
    ci = {
        "event_family": "external_integration",
        "payload": {"ci_provider": "github", "status": "running"},
    }
    assert summary(ci) == "running   github"
    assert summary(
        {"event_family": "pipeline_stage", "stage_id": "build", "stage_status": "completed"}
    ) == ("completed build")
    assert summary(
        {"event_family": "runtime_execution", "executor_kind": "tool", "status": "failed"}
    ) == ("failed    tool")
    assert summary({}) == "(no summary: see --json)"


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_keys = st.sampled_from(
    [
        "file_path",
        "change_type",
        "previous_path",
        "event_kind",
        "ref_name",
        "commit_id",
        "tool_id",
        "tool_kind",
        "status",
        "ci_provider",
        "pipeline_id",
        "run_id",
        "node_type",
        "node_id",
        "cause",
        "changes",
    ]
)


@given(
    family=st.sampled_from(
        ["graph_update", "pipeline_stage", "runtime_execution", "external_integration", None]
    ),
    top=st.dictionaries(
        st.sampled_from(["update_kind", "event_type", "stage_status", "stage_id", "status"]),
        _values,
    ),
    payload=st.dictionaries(_keys, _values) | _values,
)
def test_any_envelope_gives_one_line_without_a_placeholder(
    family: str | None, top: dict[str, Any], payload: Any
) -> None:
    line = summary({**top, "event_family": family, "payload": payload})
    assert line.strip()
    assert not line[0].isspace()
    assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in line)
    assert "#?" not in line and " ? " not in line


def test_a_file_name_with_a_newline_cannot_forge_a_second_line() -> None:
    envelope = {
        "payload": {"file_path": "a\nfile_update    deleted   b.py", "change_type": "created"}
    }
    assert summary(envelope) == "created   a\\x0afile_update    deleted   b.py"


def test_a_move_without_a_file_name_starts_with_what_it_has() -> None:
    # Found by the property above: the "(from ...)" part was glued to an empty file name.
    envelope = {
        "event_family": "graph_update",
        "payload": {"previous_path": True, "file_path": None},
    }
    assert summary(envelope) == "(from True)"
