"""json_input.lone_surrogate_at: where a value holds text that has no UTF-8 form."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from mplp_lsp.protocol.json_input import lone_surrogate_at
from tests.support.properties import examples

# Any code point, lone surrogates (Cs) included; keys without the path's "." and "[", and not
# empty (the notation writes an empty key as nothing: "" is the root, "a." a key "" in "a").
text = st.text(st.characters(), max_size=4)
keys = st.text(st.characters(categories=["Ll", "Lo", "Cs"]), min_size=1, max_size=3)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=30,
)


def at(value: Any, path: str) -> Any:
    """What ``path`` (``a.b[0]``, as lone_surrogate_at writes it) names: a value, or a key
    that has no UTF-8 form."""
    # "[0].k" (a list at the top) starts with an index, "a[0]" has one after a name.
    for part in path.replace("[", ".[").removeprefix(".").split(".") if path else []:
        if part.startswith("["):
            value = value[int(part[1:-1])]
        elif not encodes(part):
            return part
        else:
            value = value[part]
    return value


def encodes(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@settings(max_examples=examples(500))
@given(values)
@example([{"\ud800": None}])  # a list at the top: the path starts with an index
def test_it_finds_text_exactly_when_the_value_has_no_utf8_form(value: Any) -> None:
    where = lone_surrogate_at(value)
    assert (where is None) == encodes(value)
    if where is not None:
        found = at(value, where)
        assert isinstance(found, str) and not encodes(found)


def test_it_names_a_key_and_a_list_item() -> None:
    assert lone_surrogate_at({"a": [1, {"b\ud800": 2}]}) == "a[1].b\ud800"
    assert lone_surrogate_at({"a": ["ok", "x\udfff"]}) == "a[1]"
    assert lone_surrogate_at({"a": ["ok", "\U0001f600"]}) is None  # a pair is fine
