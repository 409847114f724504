"""A large message's body is parsed by orjson, with json's outcome for every body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.lsp.stdio import parse_body
from tests.support.properties import examples

pytestmark = pytest.mark.unit

PADDING = {"pad": "x" * 70_000}  # over the size from which orjson parses
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _outcome(parse: Any, body: bytes) -> Any:
    try:
        return ("parsed", parse(body))
    except (ValueError, RecursionError) as error:
        return ("refused", type(error).__name__)


@settings(max_examples=examples(200), deadline=None)
@given(JSON_VALUES)
def test_a_large_body_parses_as_json_parses_it(value: Any) -> None:
    body = json.dumps({"value": value, **PADDING}).encode()
    assert _outcome(parse_body, body) == _outcome(json.loads, body)


@pytest.mark.parametrize(
    "odd",
    [
        b'{"n": NaN, "i": Infinity}',
        b'{"big": 123456789012345678901234567890}',
        b'{"lone": "\\ud800"}',
        '{"utf16": "é"}'.encode("utf-16-le"),
        b'{"bad": "\xff"}',
        b'{"cut": ',
        b"[" * 100_000,
    ],
)
def test_what_orjson_refuses_has_json_s_outcome(odd: bytes) -> None:
    """JSON that orjson refuses and json takes, and what both refuse."""
    body = odd if len(odd) >= 70_000 else odd + b" " * 70_000
    assert _outcome(parse_body, body) == _outcome(json.loads, body)
