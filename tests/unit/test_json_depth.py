"""json_input.check_depth against the definition of depth, on generated nestings."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.protocol import json_input

values = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=40,
)


def depth(value: Any) -> int:
    """Containers on the longest path from the root (a scalar: 0)."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


@given(values, st.integers(min_value=1, max_value=6))
def test_refused_exactly_when_deeper_than_the_limit(value: Any, limit: int) -> None:
    if depth(value) > limit:
        with pytest.raises(json_input.JsonRejected):
            json_input.check_depth(value, limit)
    else:
        json_input.check_depth(value, limit)


def test_two_hundred_thousand_brackets_are_refused_without_recursion() -> None:
    nested: Any = []
    for _ in range(200_000):
        nested = [nested]
    with pytest.raises(json_input.JsonRejected) as refused:
        json_input.check_depth(nested)
    assert refused.value.code.value == "nesting_too_deep"


@given(values, st.integers(min_value=1, max_value=6))
def test_a_container_the_caller_checked_is_not_walked(value: Any, limit: int) -> None:
    """The verdict on ``[value, checked]`` is the one on ``[value]``, whatever ``checked``
    holds (here far more than any limit)."""
    checked: Any = []
    for _ in range(1000):
        checked = [checked]
    try:
        json_input.check_depth([value], limit)
    except json_input.JsonRejected:
        with pytest.raises(json_input.JsonRejected):
            json_input.check_depth([value, checked], limit, checked={id(checked)})
    else:
        json_input.check_depth([value, checked], limit, checked={id(checked)})
