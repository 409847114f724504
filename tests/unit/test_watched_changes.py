"""The watched-files notification as the server structures it: the same events, and the
same refusals, as pygls's own structuring (lsp/protocol.MplpProtocol.structure_message)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types
from pygls.protocol import LanguageServerProtocol

from mplp_lsp.lsp.app import create_server
from mplp_lsp.lsp.protocol import FileEvents

_PROTOCOL = create_server().protocol

_change = st.one_of(
    st.fixed_dictionaries(
        {
            "uri": st.text(max_size=20).map(lambda s: f"file:///{s}"),
            "type": st.sampled_from([1, 2, 3]),
        }
    ),
    st.fixed_dictionaries(
        {
            "uri": st.one_of(st.text(max_size=5), st.integers(), st.none()),
            "type": st.integers(-1, 5),
        }
    ),
    st.dictionaries(st.sampled_from(["uri", "type", "extra"]), st.integers(0, 3), max_size=3),
    st.integers(),
    st.none(),
)


def _message(changes: Any) -> dict[str, Any]:
    method = types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    return {"jsonrpc": "2.0", "method": method, "params": {"changes": changes}}


def _outcome(structure: Any, changes: Any) -> Any:
    try:
        return list(structure(_message(changes)).params.changes)
    except Exception as error:  # what pygls logs and drops (a notification has no answer)
        return type(error).__name__


@given(st.lists(_change, max_size=8))
def test_changes_are_structured_and_refused_as_pygls_does(changes: list[Any]) -> None:
    ours = _outcome(_PROTOCOL.structure_message, changes)
    assert ours == _outcome(
        lambda data: LanguageServerProtocol.structure_message(_PROTOCOL, data), changes
    )


def test_plain_changes_become_events_as_they_are_read() -> None:
    changes = [{"uri": f"file:///w/f{i}.py", "type": 1 + i % 3} for i in range(5)]
    events = _PROTOCOL.structure_message(_message(changes)).params.changes
    assert isinstance(events, FileEvents) and len(events) == 5
    assert events[4] == types.FileEvent(uri="file:///w/f4.py", type=types.FileChangeType.Changed)
    assert list(events[1:3]) == [
        types.FileEvent(uri=f"file:///w/f{i}.py", type=types.FileChangeType(1 + i % 3))
        for i in (1, 2)
    ]
